"""Why a task image build failed, in one sentence, and whether trying it again can help
(docs/builds.md).

A failed build's log ends with the failing step's command ("The command '/bin/sh -c ...'
returned a non-zero code"), which says where, not why. The cause is usually a line the step
printed earlier: a TLS certificate the build container does not trust (a TLS-intercepting proxy:
`--build-proxy`), or a step written for the FROM image that depthtui had to substitute (an
Ubuntu PPA on the Debian base). A step that fails the same way every time is not built again: a
retry only follows a cause outside the build's content (the network, the engine).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Appended to the detail of a build error that would fail the same way again; the retry loop
# (engine/protocol/common.py) reads it.
NOT_RETRIED = "[not retried: the same build fails the same way]"
# How the line naming the cause starts (depthtui/commands/show.py quotes it).
CAUSE = "cause: "

_CERT = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|SSL certificate problem"
    r"|x509: certificate signed by unknown authority"
    r"|self[- ]signed certificate in certificate chain",
    re.IGNORECASE,
)
# Causes a later try may not meet: the network or a mirror, not the Dockerfile.
_TRANSIENT = re.compile(
    r"Temporary failure (in name resolution|resolving)|Could not resolve host"
    r"|Connection (timed out|reset|refused)|Network is unreachable|Read timed out"
    r"|\b50[234]\b.*(Service Unavailable|Bad Gateway|Gateway Time-?out)|Hash Sum mismatch"
    r"|TLS handshake timeout|i/o timeout|no space left on device",
    re.IGNORECASE,
)
_PPA = re.compile(r"add-apt-repository|\bppa:|launchpad(content)?\.net", re.IGNORECASE)
_STEP = re.compile(r"^Step (\d+/\d+) : (.*)$")


def failing_step(log_lines: Sequence[str]) -> str | None:
    """The classic builder's last "Step N/M : INSTRUCTION" line: the step that failed."""
    for line in reversed(log_lines):
        m = _STEP.match(line.strip())
        if m:
            instruction = m.group(2).strip()
            short = instruction if len(instruction) <= 80 else instruction[:77] + "..."
            return f"step {m.group(1)} ({short})"
    return None


def cause(log_lines: Sequence[str], *, proxy_on: bool, substituted: Sequence[str]) -> str | None:
    """The cause of a failed step, when the log shows one: what, the remedy, then the step."""
    text = "\n".join(log_lines)
    step = failing_step(log_lines)
    at = f"; at {step}" if step else ""
    cert = next((m.group(0) for m in _CERT.finditer(text)), None)
    if cert is not None:
        if proxy_on:
            return (
                f"{cert}: the build does not trust a TLS certificate although --build-proxy "
                "handed it the host's CA bundle, which then lacks the proxy's CA (point "
                f"SSL_CERT_FILE at one that holds it; docs/builds.md){at}"
            )
        return (
            f"{cert}: the build does not trust a TLS certificate (a TLS-intercepting proxy?); "
            "run with `depthtui --build-proxy ...` to hand it the host's CA bundle and proxy "
            f"settings (docs/builds.md){at}"
        )
    if substituted and step and _PPA.search(step):
        froms = ", ".join(substituted)
        return (
            f"an Ubuntu PPA on a Debian base: FROM {froms} cannot be had on this engine (not "
            "present, not pullable) and depthtui/base:bookworm was substituted, but a PPA serves "
            f"Ubuntu only (docker pull or docker load the image){at}"
        )
    return None


def deterministic(log_lines: Sequence[str]) -> bool:
    """Whether a failed step would fail the same way again: no cause outside the build's
    content (network, mirror, disk) shows in the log."""
    return not _TRANSIENT.search("\n".join(log_lines))

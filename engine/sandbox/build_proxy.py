"""Task image builds behind a proxy (docs/builds.md): the host's trusted CA bundle and proxy
settings handed to the build, for machines that reach package registries only through a
(TLS-intercepting) proxy. Off unless asked for: `depthtui --build-proxy VERB` or
DEPTHTUI_BUILD_PROXY=1.

What the build gets:
- the proxy variables the host has set (HTTP(S)_PROXY, NO_PROXY, ALL_PROXY, either case) as
  Docker's predefined proxy build args: RUN steps see them, and Docker keeps them out of the
  image's history and its build cache, so a proxy URL (which may hold a password) never lands in
  an image and never decides a cache hit;
- the host's CA bundle, copied into the image right after every FROM at CA_PATH, and build args
  (ARG, so only RUN steps of the build see them; episodes do not) pointing the usual variables
  at it: SSL_CERT_FILE, PIP_CERT, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS,
  GIT_SSL_CAINFO.

The image tag covers what the image then holds: the sha256 of the CA bundle and those lines, not
the proxy values. So the same host builds each task once, with or without a proxy in between.
Only builds get the network (Docker's default bridge); episodes and verifiers stay offline.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "DEPTHTUI_BUILD_PROXY"
# Where the bundle lies in the build context and in the image.
CONTEXT_NAME = "depthtui-build-ca.pem"
CA_PATH = "/usr/local/share/depthtui/build-ca.pem"
# Docker's predefined build args (no ARG line needed; kept out of history and the cache key).
PROXY_VARS = tuple(
    name
    for base in ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY")
    for name in (base, base.lower())
)
# Where the host's CA bundle is found: the first of these variables naming a file, else the
# distribution's bundle.
CA_SOURCES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE")
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
CA_VARS = (
    "SSL_CERT_FILE",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
)
TRUE = ("1", "true", "yes", "on")
_FROM = re.compile(r"^\s*FROM\s", re.IGNORECASE)


class BuildProxyError(ValueError):
    """The option is on but the host has no CA bundle to hand over."""


@dataclass(frozen=True)
class BuildProxy:
    ca_source: Path
    ca_bytes: bytes
    proxies: Mapping[str, str]  # predefined build args: name -> value

    @property
    def lines(self) -> str:
        """What goes right after every FROM."""
        args = " ".join(f"{name}={CA_PATH}" for name in CA_VARS)
        return f"COPY {CONTEXT_NAME} {CA_PATH}\nARG {args}\n"

    def tag_material(self) -> bytes:
        """What of this hand-over the image tag covers: the bundle and the lines, never the
        proxy values."""
        digest = hashlib.sha256(self.ca_bytes).hexdigest()
        return f"build-proxy\0{digest}\0{self.lines}".encode()

    def describe(self) -> str:
        names = ", ".join(sorted(self.proxies)) or "no proxy variable"
        return f"build proxy: CA bundle {self.ca_source} and {names} handed to the build"


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get(ENV_VAR, "").strip().lower() in TRUE


def from_host(
    environ: Mapping[str, str] | None = None, system_bundles: Sequence[str] = SYSTEM_BUNDLES
) -> BuildProxy | None:
    """The hand-over when the option is on, else None. Raises BuildProxyError when it is on and
    no CA bundle can be read."""
    env = os.environ if environ is None else environ
    if not enabled(env):
        return None
    candidates = [env[k] for k in CA_SOURCES if env.get(k)] + list(system_bundles)
    for candidate in candidates:
        path = Path(candidate).expanduser()
        if path.is_file():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            proxies = {k: env[k] for k in PROXY_VARS if env.get(k)}
            return BuildProxy(ca_source=path, ca_bytes=data, proxies=proxies)
    raise BuildProxyError(
        f"{ENV_VAR} is on but no CA bundle was found (looked at ${', $'.join(CA_SOURCES)} and "
        f"{', '.join(SYSTEM_BUNDLES)}); point SSL_CERT_FILE at the host's bundle"
    )


def inject(text: str, proxy: BuildProxy) -> str:
    """The Dockerfile with the hand-over after every FROM line (continuations included)."""
    out: list[str] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if _FROM.match(line):
            while line.rstrip().endswith("\\") and i < len(lines):
                line = lines[i]
                out.append(line)
                i += 1
            if not out[-1].endswith("\n"):
                out[-1] += "\n"
            out.append(proxy.lines)
    return "".join(out)

"""The peers' ways of running one command in a container, for `depthtui bench sandbox` (the
facts are in docs/bench.md).

- The recovery bench's pipe shell: one `docker exec -i CONTAINER bash` kept open, each command
  written to its stdin as `{ CMD; } </dev/null 2>&1` and then `echo MARKER$?`, its stdout read until
  the episode's marker line comes back.
- Harbor's terminal: a tmux session in the container; each command is typed with `tmux send-keys`
  (one `docker exec`) and its result read with `tmux capture-pane -p` (one `docker exec` each
  time the pane is looked at). Harbor waits a fixed time before it looks; here the pane is read
  at once and again until the command's end shows, which is the best that way can do.

tmux is not in the base image, and no registry can be pulled: the bench image adds it from
Debian packages found on this host (the apt cache, else `apt-get download`), or says why not.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker

TMUX_IMAGE = "depthtui/bench-tmux:bookworm"
TMUX_PACKAGES = ("tmux", "libevent-core-2.1-7", "libutempter0")
APT_ARCHIVES = Path("/var/cache/apt/archives")
DEB_CACHE = Path.home() / ".cache" / "depthtui" / "bench-debs"


class PipeShell:
    """The recovery bench's agent shell: `docker exec -i` with bash, driven through pipes."""

    def __init__(self, container_id: str, user: str, workdir: str) -> None:
        self.marker = f"__END_{secrets.token_hex(8)}__"
        self._done = self.marker.encode()
        argv = ["docker", "exec", "-i", "-u", user, "-w", workdir, "-e", "TERM=dumb"]
        self.proc = subprocess.Popen(
            [*argv, container_id, "bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=0,
        )
        self._buf = b""

    def run(self, command: str) -> tuple[bytes, int]:
        """The command's merged output and its exit code."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{{ {command}\n}} </dev/null 2>&1\necho {self.marker}$?\n".encode())
        fd = self.proc.stdout.fileno()
        while True:
            at = self._buf.find(self._done)
            if at >= 0:
                end = self._buf.find(b"\n", at)
                if end >= 0:
                    out = self._buf[:at]
                    code = int(self._buf[at + len(self._done) : end])
                    self._buf = self._buf[end + 1 :]
                    return out, code
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError("the pipe shell ended")
            self._buf += chunk

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class TmuxTerminal:
    """Harbor's agent terminal: send-keys, then read the pane, each through one exec (made as
    `docker exec` makes it: create, start, inspect)."""

    def __init__(self, api: docker.APIClient, container_id: str, user: str, home: str) -> None:
        self.api = api
        self.container_id = container_id
        self.user = user
        self.env = [f"HOME={home}", "TERM=xterm"]
        self.home = home
        self._tmux("new-session", "-d", "-s", "bench", "-x", "200", "-y", "50")
        self._tmux("send-keys", "-t", "bench", "exec bash --noprofile --norc", "Enter")

    def _tmux(self, *args: str) -> bytes:
        exec_id = self.api.exec_create(
            self.container_id,
            ["tmux", *args],
            user=self.user,
            environment=self.env,
            workdir=self.home,
        )["Id"]
        out = self.api.exec_start(exec_id)
        if self.api.exec_inspect(exec_id).get("ExitCode") != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {out[-300:]!r}")
        return out

    def run(self, command: str) -> int:
        """Type the command, then read the pane until its end mark shows; how many looks."""
        mark = f"E{secrets.token_hex(4)}"
        # The mark is printed in two halves so that the typed line itself never matches.
        self._tmux("send-keys", "-t", "bench", f"{command}; echo {mark[:3]}''{mark[3:]}", "Enter")
        for looks in range(1, 1000):
            if mark.encode() in self._tmux("capture-pane", "-p", "-t", "bench"):
                return looks
        raise RuntimeError("the command's end never showed in the tmux pane")


@dataclass(frozen=True)
class TmuxImage:
    tag: str | None  # None: no tmux image could be had, and `why` says why
    why: str = ""


def tmux_image(client: docker.DockerClient, base: str) -> TmuxImage:
    """`base` with tmux installed from Debian packages on this host (built once, then reused)."""
    try:
        client.api.inspect_image(TMUX_IMAGE)
        return TmuxImage(TMUX_IMAGE)
    except docker.errors.ImageNotFound:
        pass
    debs, why = _debs()
    if not debs:
        return TmuxImage(None, why)
    context = io.BytesIO()
    dockerfile = (
        f"FROM {base}\nCOPY debs/ /tmp/debs/\n"
        "RUN dpkg -i /tmp/debs/*.deb && rm -rf /tmp/debs && tmux -V\n"
    )
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for deb in debs:
            tar.add(deb, arcname=f"debs/{deb.name}")
    context.seek(0)
    try:
        client.images.build(
            fileobj=context,
            custom_context=True,
            tag=TMUX_IMAGE,
            labels={"depthtui.bench": "1"},
            network_mode="none",
            rm=True,
        )
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        return TmuxImage(None, f"installing tmux into {base} failed: {str(exc)[-300:]}")
    return TmuxImage(TMUX_IMAGE)


def _debs() -> tuple[list[Path], str]:
    """One .deb per package in TMUX_PACKAGES (the apt cache first, then `apt-get download`
    into DEB_CACHE), or why they cannot be had."""
    found, missing = _find_debs()
    if not missing:
        return found, ""
    if shutil.which("apt-get") is None:
        return [], f"no .deb for {', '.join(missing)} on this host and no apt-get to fetch them"
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=DEB_CACHE) as tmp:
        try:
            got = subprocess.run(
                ["apt-get", "download", *missing], cwd=tmp, capture_output=True, timeout=120
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [], f"apt-get download {' '.join(missing)} failed: {exc}"
        if got.returncode != 0:
            return [], f"apt-get download {' '.join(missing)} failed: {got.stderr[-300:]!r}"
        for deb in Path(tmp).glob("*.deb"):
            deb.rename(DEB_CACHE / deb.name)
    found, missing = _find_debs()
    if missing:
        return [], f"apt-get download gave no .deb for {', '.join(missing)}"
    return found, ""


def _find_debs() -> tuple[list[Path], list[str]]:
    found: list[Path] = []
    missing: list[str] = []
    for name in TMUX_PACKAGES:
        hits = sorted(APT_ARCHIVES.glob(f"{name}_*.deb")) + sorted(DEB_CACHE.glob(f"{name}_*.deb"))
        if hits:
            found.append(hits[-1])
        else:
            missing.append(name)
    return found, missing

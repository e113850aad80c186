"""What a task needs that one offline container cannot give: a GUI desktop, a Windows machine,
a service beside the agent's container (a compose service, an MCP server), or the network.

depthtui runs a task's main container alone and offline, so such a task cannot be measured here;
it is said at import and by `check` (docs/realtasks.md), never passed off as "ok". The signs are
read from the task's own files, each reason naming the file and line that shows it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# A desktop or remote display the agent would look at (a bare Xvfb for headless tests is not).
_DESKTOP = re.compile(
    r"\b(xfce4|lxde|lxqt|gnome-session|ubuntu-desktop|kde-plasma-desktop|x11vnc|tigervnc"
    r"|tightvncserver|novnc|xrdp|websockify)\b",
    re.IGNORECASE,
)
_VNC_PORTS = re.compile(r"^\s*EXPOSE\b.*\b(5900|5901|6080)\b", re.IGNORECASE)
_WINDOWS_BASE = re.compile(
    r"^\s*FROM\s+(?:--\S+\s+)*\S*(mcr\.microsoft\.com/windows|servercore|nanoserver)", re.IGNORECASE
)
# A command that reaches a host other than this machine while the reference solution runs.
_FETCH = re.compile(
    r"\b(curl|wget|git\s+clone|pip3?\s+install|uv\s+pip\s+install|npm\s+(?:install|ci)"
    r"|apt-get\s+install|apt\s+install)\b"
)
_LOCAL_URL = re.compile(r"https?://(localhost|127\.|\[::1\]|0\.0\.0\.0)")


def find_needs(
    *,
    dockerfile: tuple[str, str] | None = None,
    services: Iterable[str] = (),
    compose_name: str = "docker-compose.yaml",
    environment: Mapping[str, Any] | None = None,
    network_allowed: bool = False,
    solution: tuple[str, str] | None = None,
) -> tuple[str, ...]:
    """Reasons, one per need. `dockerfile` and `solution` are (file name for the message, text);
    `services` are the compose services other than main; `environment` is task.toml's table."""
    found: list[str] = []
    environment = environment or {}
    if dockerfile is not None:
        found += _image_needs(*dockerfile)
    os_name = str(environment.get("os") or environment.get("platform") or "")
    if os_name.lower().startswith("windows"):
        found.append(f"needs a Windows machine (task.toml [environment] os = {os_name!r})")
    for name in sorted(services):
        found.append(
            f"needs service {name} ({compose_name} starts it beside main; depthtui runs the "
            "main container alone)"
        )
    for server in _mcp_servers(environment):
        found.append(f"needs service {server} (an MCP server task.toml declares for the agent)")
    if network_allowed and solution is not None:
        line = _fetch_line(solution[1])
        if line:
            found.append(
                f"needs the network ({solution[0]} line {line[0]}: {line[1][:80]}; the task "
                "allows internet access and this machine runs offline)"
            )
    return tuple(dict.fromkeys(found))


def _image_needs(name: str, text: str) -> list[str]:
    """The first sign of each kind in the image's definition."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        if _WINDOWS_BASE.match(line):
            out.setdefault(
                "windows", f"needs a Windows machine ({name} line {number}: a Windows base image)"
            )
        desktop = _DESKTOP.search(line)
        if desktop:
            out.setdefault(
                "gui", f"needs a GUI ({name} line {number}: installs {desktop.group(1)})"
            )
        elif _VNC_PORTS.match(line):
            out.setdefault(
                "gui", f"needs a GUI ({name} line {number}: exposes a remote display port)"
            )
    return list(out.values())


def _mcp_servers(environment: Mapping[str, Any]) -> list[str]:
    servers = environment.get("mcp_servers")
    if isinstance(servers, Mapping):
        return [str(k) for k in servers]
    if isinstance(servers, list):
        return [
            str(s.get("name") or s.get("url") or "an MCP server")
            if isinstance(s, Mapping)
            else str(s)
            for s in servers
        ]
    return []


def _fetch_line(script: str) -> tuple[int, str] | None:
    for number, raw in enumerate(script.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if _FETCH.search(line) and not _LOCAL_URL.search(line):
            return number, line
    return None

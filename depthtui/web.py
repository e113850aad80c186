"""`depthtui tui --web`: the same TUI in a browser, served by textual-serve.

Each browser tab that opens the page starts its own `python -m depthtui --db PATH` process on
this machine and drives it over a websocket, so whoever reaches the port has the TUI: they can
read every episode and launch jobs (which run agents in Docker here). That is why the server
listens on loopback unless told otherwise; docs/tui.md says how to reach it from elsewhere.
"""

from __future__ import annotations

import ipaddress
import shlex
import socket
import sys
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
INSTALL_HINT = "the browser view needs textual-serve: pip install 'depthtui[web]'"


class WebError(RuntimeError):
    """The server cannot start (textual-serve missing, the port taken, a bad host)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def app_command(db: Path) -> str:
    """The shell command textual-serve runs per browser tab: this Python, this store, no verb
    (so the TUI starts without importing the other commands)."""
    return f"{shlex.quote(sys.executable)} -m depthtui --db {shlex.quote(str(db))}"


def public_url_for(host: str, port: int, public_url: str | None) -> str:
    """The address the page tells the browser to connect back to: a wildcard host (0.0.0.0, ::)
    is no address a browser can use, so this machine's name stands in for it."""
    if public_url:
        return public_url.rstrip("/")
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return f"http://{host}:{port}"


def check_port(host: str, port: int) -> None:
    """Fail before textual-serve starts if the address cannot be bound (it would only log)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise WebError(f"--host {host}: not an address of this machine ({exc.strerror})") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise WebError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def serve(db: Path, host: str, port: int, public_url: str | None = None) -> None:
    """Serve the TUI on `db` until interrupted (ctrl+c or SIGTERM)."""
    try:
        from textual_serve.server import Server
    except ImportError as exc:
        raise WebError(INSTALL_HINT) from exc
    check_port(host, port)
    url = public_url_for(host, port, public_url)
    if not is_loopback(host):
        print(
            f"warning: serving on {host}: anyone who can reach port {port} controls this TUI "
            "and can launch jobs on this machine (docs/tui.md)",
            file=sys.stderr,
        )
    server = Server(app_command(db), host=host, port=port, title=f"depthtui — {db.name}",
                    public_url=url)  # fmt: skip
    server.serve()

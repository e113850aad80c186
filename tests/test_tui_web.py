"""`depthtui tui --web`: the real command serves the TUI with textual-serve on loopback; a client
loads the page as a browser does, opens its websocket and reads the dashboard the app draws
there (no browser on the test machine: the page's own websocket protocol is spoken instead)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp  # textual-serve's own dependency (docker/setup.sh installs depthtui[web])
import pytest

pytest_plugins = ["tests.fixtures_tui"]
DEPTHTUI = str(Path(sys.executable).with_name("depthtui"))
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]|\x1b\][^\x07]*\x07")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _page(url: str, deadline: float) -> str:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


async def _dashboard(ws_url: str) -> str:
    """What the app draws in the page, as text, once the dashboard is up (then it quits)."""
    seen = b""
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url) as ws:
        await ws.send_str(json.dumps(["resize", {"width": 120, "height": 40}]))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                message = await ws.receive(timeout=5)
            except TimeoutError:
                continue
            if message.type == aiohttp.WSMsgType.BINARY:
                seen += message.data
            elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                break
            text = ANSI.sub(b"", seen).decode("utf-8", "replace")
            if "Dashboard" in text and "datasets" in text.lower():
                await ws.send_str(json.dumps(["stdin", "q"]))
                return text
    return ANSI.sub(b"", seen).decode("utf-8", "replace")


@pytest.mark.slow
def test_the_tui_is_served_to_a_browser_on_loopback(synthetic_db: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [DEPTHTUI, "--db", str(synthetic_db), "tui", "--web", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "120"},
    )
    try:
        page = _page(f"http://127.0.0.1:{port}/", time.monotonic() + 60)
        assert f"ws://127.0.0.1:{port}/ws" in page  # loopback unless --host says otherwise
        assert "depthtui · depthtui.db" in page
        drawn = asyncio.run(_dashboard(f"ws://127.0.0.1:{port}/ws?width=120&height=40"))
        assert "Dashboard" in drawn and "depthtui" in drawn, drawn[-2000:]
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)

"""`depthtui tui --web`: the real command serves the TUI with textual-serve on a loopback port;
headless Chromium loads the page and the app in it starts; over the websocket the app's own
screen arrives and a key typed there reaches it; the options fail clearly when misused."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("textual_serve", reason="the web extra is not installed")
aiohttp = pytest.importorskip("aiohttp")

pytest_plugins = ["tests.fixtures_tui"]
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["DEPTHTUI_DB"] = str(tmp_path / "not-this.db")  # --db must win over the environment
    return env


def _depthtui(*args: str, env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "depthtui", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


@pytest.fixture
def served(tui_db: Path, tmp_path: Path) -> Iterator[str]:
    """`depthtui tui --web` on a free loopback port; its URL. Stopped (SIGTERM) afterwards."""
    port = _free_port()
    proc = _depthtui("tui", "--web", "--port", str(port), "--db", str(tui_db), env=_env(tmp_path))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                _get(url + "/")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read() if proc.stdout else ""
                    pytest.fail(f"the server did not answer on {url}: {out}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode is not None


def test_the_page_names_the_app_and_listens_on_loopback_only(served: str, tui_db: Path) -> None:
    page = _get(served + "/")
    assert f"depthtui — {tui_db.name}" in page
    port = int(served.rsplit(":", 1)[1])
    assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in page
    # loopback by default: this machine's other addresses do not answer
    others = {
        info[4][0]
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
        if not info[4][0].startswith("127.")
    }
    for address in others:
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=2).close()


async def _screen_over_websocket(url: str) -> tuple[str, bool]:
    """The text the app writes to a browser's websocket until its dashboard shows; then `q` is
    typed as a browser would send it, and whether the session then ends."""
    seen = ""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url.replace("http", "ws") + "/ws?width=120&height=40") as ws,
    ):
        deadline = time.monotonic() + 90
        while "Dashboard" not in seen or "Tasks" not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                return seen, False
            message = await ws.receive(timeout=left)
            if message.type == aiohttp.WSMsgType.BINARY:
                seen += ANSI.sub("", message.data.decode("utf-8", "replace"))
            elif message.type != aiohttp.WSMsgType.TEXT:
                return seen, False
        await ws.send_str(json.dumps(["stdin", "q"]))
        try:
            while True:
                message = await ws.receive(timeout=30)
                if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                    return seen, True
        except TimeoutError:
            return seen, False


def test_the_app_runs_behind_the_websocket_and_takes_keys(served: str, tui_db: Path) -> None:
    seen, ended = asyncio.run(_screen_over_websocket(served))
    assert "Dashboard" in seen and tui_db.name in seen, seen[-2000:]
    assert ended, "q typed in the browser did not end the app's session"


async def _chromium_page(url: str, debug_port: int) -> dict:
    """Open `url` in the headless browser over the DevTools protocol and wait until the page's
    terminal has received the app's first bytes (textual-serve marks the body `-first-byte`)."""
    async with aiohttp.ClientSession() as session:
        deadline = time.monotonic() + 30
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{debug_port}/json/list") as r:
                    targets = [t for t in await r.json() if t.get("type") == "page"]
                if targets:
                    break
            except aiohttp.ClientError:
                pass
            assert time.monotonic() < deadline, "Chromium's DevTools did not answer"
            await asyncio.sleep(0.2)
        async with session.ws_connect(targets[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = iter(range(1, 10_000))

            async def call(method: str, **params) -> dict:
                mine = next(ids)
                await ws.send_json({"id": mine, "method": method, "params": params})
                while True:
                    reply = await ws.receive_json(timeout=30)
                    if reply.get("id") == mine:
                        return reply.get("result", {})

            await call("Page.navigate", url=url + "/")
            probe = (
                "JSON.stringify({body: document.body ? document.body.className : '',"
                " terminal: (document.querySelector('#terminal') || {}).className || '',"
                " name: (document.querySelector('.intro div') || {}).textContent || '',"
                " title: document.title})"
            )
            state: dict = {}
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                result = await call("Runtime.evaluate", expression=probe, returnByValue=True)
                state = json.loads(result.get("result", {}).get("value") or "{}")
                if "-first-byte" in state.get("body", ""):
                    break
                await asyncio.sleep(0.5)
            return state


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install chromium)")
def test_headless_chromium_loads_the_app(served: str, tui_db: Path) -> None:
    debug_port = _free_port()
    profile = tempfile.mkdtemp(prefix="depthtui-chromium-")
    browser = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--remote-debugging-port={debug_port}", f"--user-data-dir={profile}",
         "--window-size=1280,800", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        state = asyncio.run(_chromium_page(served, debug_port))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=20)
        except subprocess.TimeoutExpired:
            browser.kill()
        shutil.rmtree(profile, ignore_errors=True)
    assert state.get("name", "").strip() == f"depthtui — {tui_db.name}", state
    assert "-connected" in state.get("terminal", ""), state  # the page's websocket is open
    assert "-first-byte" in state.get("body", ""), state  # and the app behind it has drawn


def test_misused_options_fail_clearly(tmp_path: Path, tui_db: Path) -> None:
    env = _env(tmp_path)
    proc = _depthtui("tui", "--port", "9999", "--db", str(tui_db), env=env)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "--host, --port and --public-url go with --web" in out
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _depthtui("tui", "--web", "--port", str(port), "--db", str(tui_db), env=env)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in " ".join(out.split())

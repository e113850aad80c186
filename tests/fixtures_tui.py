"""Stores for the TUI tests.

`tui_db` is a fresh copy of a store per test (tests write labels and jobs). By default it is the
synthetic store (devtools/synthetic.py, deterministic); set DEPTHTUI_TUI_STORE to any store file
(say, one filled by real demo runs) and every flow test runs on a copy of that instead. The
snapshot and hostile-transcript tests always use the synthetic store: their content is fixed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from devtools import synthetic
from store.db import Store

STORE_ENV = "DEPTHTUI_TUI_STORE"
SIZE = (120, 40)


def _copy_store(source: Path, target: Path) -> Path:
    """A consistent copy of a (possibly WAL-mode, possibly live) store."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return target


@pytest.fixture(scope="session")
def synthetic_template(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, synthetic.Landmarks]:
    path = tmp_path_factory.mktemp("tui-template") / "depthtui.db"
    with Store(path) as store:
        landmarks = synthetic.generate(store)
    return path, landmarks


@pytest.fixture
def synthetic_db(tmp_path: Path, synthetic_template) -> Path:
    """A fresh copy of the synthetic store, named depthtui.db (the name shows in the title)."""
    template, _ = synthetic_template
    target = tmp_path / "depthtui.db"
    shutil.copyfile(template, target)
    return target


@pytest.fixture
def landmarks(synthetic_template) -> synthetic.Landmarks:
    return synthetic_template[1]


@pytest.fixture
def tui_db(tmp_path: Path, synthetic_template) -> Path:
    """The store the flow tests run on: a copy of $DEPTHTUI_TUI_STORE, else the synthetic one."""
    target = tmp_path / "depthtui.db"
    chosen = os.environ.get(STORE_ENV)
    if chosen:
        return _copy_store(Path(chosen), target)
    shutil.copyfile(synthetic_template[0], target)
    return target


async def settle(pilot) -> None:
    """Wait until the visible screen has loaded its data and every worker is done."""
    screen = pilot.app.screen
    loaded = getattr(screen, "loaded", None)
    if loaded is not None:
        await loaded.wait()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def until(pilot, condition, tries: int = 100) -> bool:
    """Let the app run until `condition()` holds (or give up after `tries` short pauses)."""
    for _ in range(tries):
        if condition():
            return True
        await pilot.pause(0.05)
    return condition()


def screen_text(app) -> str:
    """What the terminal shows, as plain text lines."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


@pytest.fixture
def tui() -> SimpleNamespace:
    """The helpers above, as a fixture (so test modules need not import this plugin module)."""
    return SimpleNamespace(settle=settle, until=until, text=screen_text, size=SIZE)

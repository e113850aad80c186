"""The oracle's work after the baseline is bounded by what it can judge: new objects are never
hashed, only the first ones are listed and only so many counted; a huge file put at a baseline
path is not hashed (its size already says it changed); deep new trees cost no memory per level
beyond the listed paths. Floods are small here: the bounds are module constants, lowered."""

from __future__ import annotations

import os

import pytest

from engine.oracle import manifest
from engine.oracle.contract import Permits
from engine.oracle.latch import Oracle

pytest_plugins = ["tests.fixtures_oracle"]

H = "/home/user"


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest, "NEW_LISTED", 50)
    monkeypatch.setattr(manifest, "NEW_COUNT_MAX", 400)
    monkeypatch.setattr(manifest, "HASH_ANY_MAX", 1 << 20)


def test_new_files_are_counted_not_hashed_and_listed_only_at_first(fake_root, small_bounds):
    fake_root.write("notes.txt", "baseline\n")
    fake_root.settle()
    scanner = fake_root.scanner()
    oracle = Oracle.start(scanner, Permits())
    flood = fake_root.p("flood")
    flood.mkdir()
    for i in range(300):
        (flood / f"f{i:04d}").write_bytes(b"x")
    res = oracle.after_call(1, "flood")
    now = oracle.last
    # No new file was hashed; notes.txt was cached by the full walk, and is hashed afresh by the
    # upper way (it lies in the upper folder, and that way never trusts timestamps).
    assert scanner.cache.hashed == (0 if fake_root.upper is None else 1)
    new = [rel for rel in now.entries if rel not in oracle.baseline.entries]
    assert len(new) == 50 and now.new_unlisted == 251 and not now.new_capped
    assert all(now.entries[rel].sha256 is None for rel in new)
    created = [e for e in res.events if e.kind == "created"]
    assert "and 251 more new paths not listed" in created[-1].detail
    assert not res.collateral
    # past NEW_COUNT_MAX the count stops and says it is a lower bound
    for i in range(300, 600):
        (flood / f"f{i:04d}").write_bytes(b"x")
    res = oracle.after_call(2, "more")
    assert oracle.last.new_capped and oracle.last.new_unlisted == 400 - 50
    assert "at least" in [e for e in res.events if e.kind == "created"][-1].detail


def test_a_huge_file_at_a_baseline_path_is_judged_without_hashing(fake_root, small_bounds):
    fake_root.write("data.bin", b"0123456789")
    fake_root.settle()
    scanner = fake_root.scanner()
    oracle = Oracle.start(scanner, Permits())  # nothing permitted
    with open(fake_root.p("data.bin"), "r+b") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB of apparent size, nothing written
    res = oracle.final_check()
    entry = oracle.last.entries["data.bin"]
    assert entry.sha256 is None and entry.size == 3 << 30
    assert [(v.path, v.kind) for v in res.violations] == [(f"{H}/data.bin", "content_changed")]
    # the same size as at the baseline is hashed, whatever the size: a same-size edit is seen
    with open(fake_root.p("data.bin"), "r+b") as f:
        f.truncate(10)
        f.write(b"9876543210")
    res = oracle.final_check()
    assert oracle.last.entries["data.bin"].sha256 is not None
    assert [v.kind for v in res.violations] == ["content_changed"]


def test_a_deep_new_tree_keeps_only_short_paths(fake_root, small_bounds):
    fake_root.settle()
    oracle = Oracle.start(fake_root.scanner(), Permits())
    name = "n" * 200
    fd = os.open(fake_root.home_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(60):  # about 12 KB of path: past PATH_MAX
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)
    oracle.after_call(1, "nest")
    now = oracle.last
    listed = [rel for rel in now.entries if rel != "."]
    assert listed and max(len(rel) for rel in listed) <= manifest.NEW_PATH_MAX
    assert len(listed) + now.new_unlisted == 60

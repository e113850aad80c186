"""The host-side manifest walker on plain folders: properties, incremental hashing, and homes built
to break it."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import threading
import tracemalloc

import pytest

from engine.oracle import manifest as mf
from engine.oracle.manifest import HashCache, ManifestError, manifest_from_tar, take_manifest

HOME = "/home/user"

pytest_plugins = ["tests.fixtures_oracle"]


def test_every_property_is_recorded(fake_root):
    fake_root.write("data/in.txt", "hello\n", 0o640)
    os.symlink("data/in.txt", fake_root.p("link"))
    os.mkfifo(fake_root.p("pipe"), 0o600)
    os.chmod(fake_root.home_dir, 0o750)
    m = take_manifest(fake_root.home_dir, HOME)
    assert set(m.entries) == {".", "data", "data/in.txt", "link", "pipe"}
    home = m.entries["."]
    assert (home.type, home.mode) == ("dir", 0o750)
    f = m.entries["data/in.txt"]
    assert (f.type, f.mode, f.uid, f.size) == ("file", 0o640, os.getuid(), 6)
    assert f.sha256 == hashlib.sha256(b"hello\n").hexdigest()
    link = m.entries["link"]
    assert (link.type, link.target, link.sha256, link.size) == (
        "symlink",
        "data/in.txt",
        None,
        None,
    )
    assert m.entries["pipe"].type == "fifo"
    assert m.entries["pipe"].sha256 is None
    assert m.abspath("data/in.txt") == "/home/user/data/in.txt"
    assert m.get("/home/user/link") == link
    assert m.get("/home/user") == home


def test_a_fifo_is_never_opened(fake_root):
    os.mkfifo(fake_root.p("pipe"))
    # A writer blocks in open() until some reader opens the pipe: if the walk opened it, the
    # writer would get through.
    opened = threading.Event()

    def writer():
        fd = os.open(fake_root.p("pipe"), os.O_WRONLY)
        opened.set()
        os.close(fd)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    m = take_manifest(fake_root.home_dir, HOME)
    assert m.entries["pipe"].type == "fifo"
    assert not opened.wait(0.3)
    # Release the writer ourselves.
    fd = os.open(fake_root.p("pipe"), os.O_RDONLY | os.O_NONBLOCK)
    assert opened.wait(5)
    os.close(fd)
    t.join(5)


def test_incremental_hashes_only_what_changed(fake_root):
    for i in range(20):
        fake_root.write(f"d/f{i}.txt", f"file {i}\n")
    fake_root.settle()
    cache = HashCache()
    first = take_manifest(fake_root.home_dir, HOME, cache)
    assert cache.hashed == 20
    again = take_manifest(fake_root.home_dir, HOME, cache)
    assert cache.hashed == 0
    assert again.entries == first.entries
    # Same size, mtime put back: only ctime betrays the change, and it is enough.
    path = fake_root.p("d/f3.txt")
    st = os.stat(path)
    path.write_text("FILE 3\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = take_manifest(fake_root.home_dir, HOME, cache)
    assert cache.hashed == 1
    assert after.entries["d/f3.txt"].sha256 == hashlib.sha256(b"FILE 3\n").hexdigest()


def test_recent_files_are_hashed_again_next_time(fake_root):
    """Racy clean: a file changed just before the walk is not trusted from the cache."""
    fake_root.write("x.txt", "x\n")
    cache = HashCache()
    take_manifest(fake_root.home_dir, HOME, cache)
    assert "x.txt" not in cache.by_path
    take_manifest(fake_root.home_dir, HOME, cache)
    assert cache.hashed == 1


def test_adversarial_names(fake_root):
    names = [
        b"new\nline.txt",
        b"bad\xff\xfeutf8",
        b" lead space",
        b"-rf",
        b"tab\there",
        b"\x1b[31m",
    ]
    home = os.fsencode(fake_root.home_dir)
    for n in names:
        with open(os.path.join(home, n), "wb") as fh:
            fh.write(n)
    m = take_manifest(fake_root.home_dir, HOME)
    for n in names:
        e = m.entries[os.fsdecode(n)]
        assert e.sha256 == hashlib.sha256(n).hexdigest()
    printable = mf.printable(m.abspath(os.fsdecode(b"bad\xff\xfeutf8")))
    assert printable == "/home/user/bad\\xff\\xfeutf8"
    printable.encode("utf-8")  # storable as text


def test_symlink_loops_and_links_out_are_not_followed(fake_root, tmp_path):
    os.symlink(".", fake_root.p("loop"))
    os.symlink("b", fake_root.p("a"))
    os.symlink("a", fake_root.p("b"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    os.symlink(outside, fake_root.p("out"))
    m = take_manifest(fake_root.home_dir, HOME)
    assert set(m.entries) == {".", "loop", "a", "b", "out"}
    assert m.entries["out"].target == str(outside)


def test_unreadable_modes_are_read_anyway(fake_root):
    fake_root.write("locked/inside.txt", "x\n")
    fake_root.write("zero.txt", "z\n", 0o000)
    os.chmod(fake_root.p("locked"), 0o000)
    try:
        m = take_manifest(fake_root.home_dir, HOME)
    finally:
        os.chmod(fake_root.p("locked"), 0o755)
    assert m.entries["locked"].mode == 0
    assert m.entries["locked/inside.txt"].sha256 == hashlib.sha256(b"x\n").hexdigest()
    assert m.entries["zero.txt"].sha256 == hashlib.sha256(b"z\n").hexdigest()


def test_deep_nesting_beyond_path_max(fake_root):
    """Every open is relative to its parent's descriptor, so paths longer than PATH_MAX work."""
    name = "d" * 60
    fd = os.open(fake_root.home_dir, os.O_RDONLY | os.O_DIRECTORY)
    depth = 120  # 120 * 61 characters: about 7,300, beyond PATH_MAX (4,096)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"deep")
    os.close(leaf)
    os.close(fd)
    m = take_manifest(fake_root.home_dir, HOME)
    deepest = "/".join([name] * depth) + "/leaf"
    assert len(deepest) > 4096
    assert m.entries[deepest].sha256 == hashlib.sha256(b"deep").hexdigest()
    assert len(m.entries) == depth + 2


def test_too_deep_is_refused_at_baseline_and_cut_short_later(fake_root, monkeypatch):
    monkeypatch.setattr(mf, "MAX_DEPTH", 5)
    fake_root.p("a/b/c/d/e/f/g").mkdir(parents=True)
    with pytest.raises(ManifestError, match="nested more than 5"):
        take_manifest(fake_root.home_dir, HOME, baseline=True)
    m = take_manifest(fake_root.home_dir, HOME)
    assert "a/b/c/d/e" in m.entries
    assert "a/b/c/d/e/f" not in m.entries
    assert m.not_descended == ("a/b/c/d/e",)


def test_files_vanishing_mid_walk_are_absent(fake_root, monkeypatch):
    fake_root.write("stays.txt", "s")
    fake_root.write("goes.txt", "g")
    real_open = mf._open_file

    def racing_open(name, dir_fd):
        if name == "goes.txt":
            os.unlink(name, dir_fd=dir_fd)  # the agent's process wins the race
        return real_open(name, dir_fd)

    monkeypatch.setattr(mf, "_open_file", racing_open)
    m = take_manifest(fake_root.home_dir, HOME)
    assert "goes.txt" not in m.entries
    assert "stays.txt" in m.entries


def test_a_file_swapped_for_a_fifo_between_lstat_and_open(fake_root, monkeypatch):
    fake_root.write("swap", "x")
    real_open = mf._open_file

    def swapping_open(name, dir_fd):
        if name == "swap":
            os.unlink(name, dir_fd=dir_fd)
            os.mkfifo(name, dir_fd=dir_fd)
        return real_open(name, dir_fd)

    monkeypatch.setattr(mf, "_open_file", swapping_open)
    m = take_manifest(fake_root.home_dir, HOME)
    assert m.entries["swap"].type == "fifo"


def test_huge_file_is_hashed_streaming(fake_root):
    size = 256 * 1024 * 1024
    with open(fake_root.p("huge.img"), "wb") as fh:
        fh.truncate(size)  # sparse: no disk used, but every byte is read
    want = hashlib.sha256()
    zeros = bytes(1 << 20)
    for _ in range(size >> 20):
        want.update(zeros)
    tracemalloc.start()
    try:
        m = take_manifest(fake_root.home_dir, HOME)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m.entries["huge.img"].sha256 == want.hexdigest()
    assert peak < 16 * 1024 * 1024


@pytest.mark.slow
def test_a_hundred_thousand_files(fake_root):
    for d in range(100):
        folder = fake_root.p(f"d{d:03d}")
        folder.mkdir()
        for i in range(1000):
            (folder / f"f{i}").write_bytes(b"%d" % i)
    cache = HashCache()
    m = take_manifest(fake_root.home_dir, HOME, cache)
    assert len(m.entries) == 1 + 100 + 100_000
    assert m.entries["d042/f7"].sha256 == hashlib.sha256(b"7").hexdigest()


def test_texts_are_kept_for_small_text_files_only(fake_root):
    fake_root.write("small.txt", "a\nb\n")
    fake_root.write("bin.dat", b"\x00\x01")
    fake_root.write("big.txt", "x" * (mf.TEXT_MAX + 1))
    m = take_manifest(fake_root.home_dir, HOME, keep_texts=True)
    assert m.texts == {"small.txt": b"a\nb\n"}


def _tar_of(home_dir, arcname: str) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(home_dir, arcname=arcname)
    buf.seek(0)
    return buf


def test_tar_parse_matches_the_walk(fake_root):
    fake_root.write("a/b.txt", "bee\n", 0o600)
    fake_root.write("c", b"\x00\xff")
    os.link(fake_root.p("c"), fake_root.p("c_hardlink"))
    os.symlink("a/b.txt", fake_root.p("ln"))
    os.mkfifo(fake_root.p("pipe"), 0o666)
    with open(os.path.join(os.fsencode(fake_root.home_dir), b"odd\n\xffname"), "wb") as fh:
        fh.write(b"odd")
    walked = take_manifest(fake_root.home_dir, HOME)
    parsed = manifest_from_tar(_tar_of(fake_root.home_dir, "user"), HOME)
    assert set(parsed.entries) == set(walked.entries)
    for rel, e in walked.entries.items():
        assert parsed.entries[rel].same_properties(e), rel


def test_tar_parse_rejects_a_broken_stream():
    with pytest.raises(ManifestError, match="tar stream"):
        manifest_from_tar(io.BytesIO(b"not a tar at all" * 64), HOME)


def test_home_behind_a_symlink_in_the_image_is_refused(tmp_path):
    root = tmp_path / "rootfs"
    (root / "home").mkdir(parents=True)
    elsewhere = tmp_path / "host_folder"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "home" / "user")
    with pytest.raises(ManifestError, match="not a real folder"):
        mf.ManifestScanner(HOME, root).take()


def test_scanner_reads_one_file_without_following_links(fake_root):
    fake_root.write("d/t.txt", "text\n")
    os.symlink("/etc/passwd", fake_root.p("d/pw"))
    sc = fake_root.scanner()
    assert sc.read_file("d/t.txt") == b"text\n"
    assert sc.read_file("d/pw") is None
    assert sc.read_file("d/missing") is None
    m = sc.take()
    assert m.source == "rootfs"
    assert stat.S_IMODE(os.stat(fake_root.p("d/t.txt")).st_mode) == m.entries["d/t.txt"].mode

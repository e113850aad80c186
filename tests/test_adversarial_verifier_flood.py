"""What a Harbor test.sh prints or copies of the agent's files is bounded on the host (issue 24
point 3), on real Docker with the real verifier: the agent made its output file a link to
/dev/zero. Printed, the output stream is cut past 256 MiB; copied into /logs/verifier (a host
folder), the folder's size is. Both are the agent's failure (`output_flood`), in seconds, and
the host's temporary folder holds next to nothing meanwhile (17.6 GiB in 15 s before)."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest

from engine.tasks.model import Limits
from engine.verify.harbor_verifier import FLOOD_LIMIT, HarborSpec, run_harbor_verifier
from store import vocab

pytestmark = [pytest.mark.docker]
pytest_plugins = ["tests.fixtures_verify"]

LINK = "ln -s /dev/zero /home/user/out.txt"
PRINTS = """#!/bin/bash
cat /home/user/out.txt
echo 0 > /logs/verifier/reward.txt
"""
COPIES = """#!/bin/bash
cp /home/user/out.txt /logs/verifier/copy.txt
echo 0 > /logs/verifier/reward.txt
"""
HONEST = """#!/bin/bash
head -c 3000000 /dev/zero | tr '\\0' x
echo; echo tail-line
echo 1 > /logs/verifier/reward.txt
"""


def _temp_usage() -> int:
    total = 0
    for folder in Path(tempfile.gettempdir()).glob("depthtui-*"):
        for path in folder.rglob("*"):
            try:
                total += path.lstat().st_blocks * 512
            except OSError:
                pass
    return total


@pytest.mark.parametrize("test_sh", [PRINTS, COPIES], ids=["prints", "copies"])
def test_a_link_to_dev_zero_in_what_test_sh_reads_is_cut_short(
    snapshot, write_tests, toolchain, test_sh: str
) -> None:
    image = snapshot(LINK)
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.1):
            peak[0] = max(peak[0], _temp_usage())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        verdict = run_harbor_verifier(
            HarborSpec(
                image=image,
                tests=write_tests({"test.sh": test_sh}),
                timeout_s=120.0,
                limits=Limits(),
            ),
            toolchain=toolchain,
        )
    finally:
        stop.set()
        watcher.join()
    took = time.monotonic() - started
    assert verdict.error_code == "output_flood", verdict.error_detail
    assert vocab.AGENT_CODES["output_flood"] == "verifier_output"
    assert took < 60.0  # stopped by the bound, not by the 120 s timeout
    # Printed: nothing of it on the host. Copied: the folder is cut about its bound.
    assert peak[0] < FLOOD_LIMIT + (256 << 20), peak[0]
    if test_sh is PRINTS:
        assert peak[0] < 16 << 20, peak[0]
        assert len(verdict.output) <= 4100  # a tail is stored, not the flood


def test_ordinary_output_is_kept_as_head_and_tail(snapshot, write_tests, toolchain) -> None:
    image = snapshot("true")
    verdict = run_harbor_verifier(
        HarborSpec(
            image=image, tests=write_tests({"test.sh": HONEST}), timeout_s=60.0, limits=Limits()
        ),
        toolchain=toolchain,
    )
    assert verdict.ok and verdict.passed, verdict.error_detail
    # What test.sh printed ends with its last line; the gate's decision line follows it.
    printed, _, decision = verdict.output.rpartition("\n[depthtui] ")
    assert printed.rstrip().endswith("tail-line") and decision.startswith("passed")
    # 3 MB printed: the tail is kept, with the full size
    assert verdict.output.startswith("[... 3000011 bytes in all]")
    assert len(printed) < 4100

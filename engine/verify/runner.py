"""The trusted pytest runner: runs inside the verifier container under the toolchain's own Python.

docker/toolchain.sh copies this file into the toolchain folder, so it imports nothing but the
standard library at the top (pytest is imported from the toolchain once the path is set). The host
(engine/verify/pytest_verifier.py) imports it only for the record format: `encode_record` and
`decode_record`.

The protocol, in order:
1. make this process non-dumpable, so other processes of the same uid (code the tests start)
   can neither ptrace it nor read its memory, environment or file descriptors through /proc;
2. read one line from stdin, the host's secret (hex), then close stdin for good;
3. keep a private copy of stdout for the record and point fd 1 at stderr, so everything the tests
   print lands on stderr and stdout carries only the record;
4. run pytest in-process with a collector plugin that records each test's setup, call and
   teardown outcome;
5. print exactly one line: RECORD_PREFIX, the record as base64 JSON, and its HMAC-SHA256 under
   the secret. The secret itself never leaves the process.

`--plain ARGS...` runs the toolchain's pytest as a command (Harbor test.sh mode: no secret, exit
status is pytest's). The same collector records each test's phases; when RESULTS_DIR exists (the
Harbor verifier mounts a fresh host folder there) one JSON file per pytest run is written into
it. Like the reward file test.sh writes, that file is as trustworthy as test.sh's run itself
(docs/verifier-tests.md). pytest-json-ctrf is loaded too, so a test.sh's `--ctrf FILE` works.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import sys

RECORD_PREFIX = "DEPTHTUI-VERDICT-V1 "
RECORD_VERSION = 1
MESSAGE_LIMIT = 2000
# Environment variables that could steer pytest or the programs tests start.
SCRUB_PREFIXES = ("LD_", "PYTHON", "PYTEST_")
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
# Exit statuses of the runner itself (pytest's own status is inside the record).
EXIT_USAGE = 2
EXIT_DUMPABLE = 3
# Where `--plain` writes its per-test records (a host folder the Harbor verifier mounts).
RESULTS_DIR = "/opt/depthtui/results"
# pytest-json-ctrf's module: Terminal-Bench test.sh files pass `--ctrf FILE`.
CTRF_PLUGIN = "ctrf.main"


def sign(secret: bytes, payload: bytes) -> str:
    return hmac.new(secret, payload, hashlib.sha256).hexdigest()


def encode_record(secret: bytes, record: dict) -> str:
    payload = base64.b64encode(json.dumps(record, sort_keys=True).encode())
    return f"{RECORD_PREFIX}{payload.decode()} {sign(secret, payload)}"


def decode_record(secret: bytes, line: str) -> dict | None:
    """The record a line carries, or None unless it is well formed and signed with `secret`."""
    if not line.startswith(RECORD_PREFIX):
        return None
    parts = line[len(RECORD_PREFIX) :].strip().split(" ")
    if len(parts) != 2:
        return None
    payload, mac = parts[0].encode(), parts[1]
    if not hmac.compare_digest(sign(secret, payload), mac):
        return None
    try:
        record = json.loads(base64.b64decode(payload, validate=True))
    except (ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


class Collector:
    """pytest plugin: what was collected, what failed to collect, and each phase of each test."""

    def __init__(self) -> None:
        self.collected: list[str] = []
        self.collect_errors: list[dict] = []
        self.tests: dict[str, dict] = {}

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collect_errors.append({"nodeid": report.nodeid, "message": _text(report.longrepr)})

    def pytest_collection_finish(self, session) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_runtest_logreport(self, report) -> None:
        entry = self.tests.setdefault(
            report.nodeid,
            {"setup": None, "call": None, "teardown": None, "duration": 0.0, "message": ""},
        )
        entry[report.when] = report.outcome
        entry["duration"] += float(report.duration or 0.0)
        if (report.failed or report.skipped) and not entry["message"]:
            entry["message"] = f"{report.when}: {_text(report.longrepr)}"


def _text(longrepr: object) -> str:
    if longrepr is None:
        return ""
    # A skip's longrepr is (file, line, reason).
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT // 2] + "\n[...]\n" + text[-MESSAGE_LIMIT // 2 :]
    return text


def _make_undumpable() -> bool:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def _read_secret() -> bytes | None:
    line = sys.stdin.buffer.readline(1024)
    sys.stdin.close()
    # fd 0 stays taken by /dev/null, so no file a test opens later becomes "stdin" by accident.
    fd = os.open(os.devnull, os.O_RDONLY)
    if fd != 0:
        os.dup2(fd, 0)
        os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as the process
    try:
        secret = bytes.fromhex(line.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return None
    return secret if len(secret) >= 16 else None


def _scrub_environment() -> None:
    for key in list(os.environ):
        if key.startswith(SCRUB_PREFIXES):
            del os.environ[key]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"


def _use_toolchain_packages() -> None:
    """-S skipped site (no .pth, no site-packages of the image); add only the toolchain's own."""
    sys.dont_write_bytecode = True
    packages = os.path.join(sys.prefix, "lib", "python3", "dist-packages")
    if packages not in sys.path:
        sys.path.append(packages)
    # Tests that start `sys.executable` get the wrapper that runs this Python through the
    # toolchain's own loader (the bare binary needs a glibc the image may not have).
    wrapper = os.path.join(sys.prefix, "bin", "python3")
    if os.path.exists(wrapper):
        sys.executable = wrapper


def _isolation_args(rootdir: str) -> list[str]:
    """No ini file, conftest or cache from anywhere the agent could write: the tests' own
    pytest.ini when they ship one, else an empty config, an explicit rootdir, and conftest
    files from the tests' own folder only (no parent of it; _guard_conftests refuses the
    rest)."""
    own = os.path.join(rootdir, "pytest.ini")
    config = own if os.path.isfile(own) else os.devnull
    return [
        "-c",
        config,
        "--rootdir",
        rootdir,
        "--confcutdir",
        rootdir,
        "-p",
        "no:cacheprovider",
        "-p",
        "pytest_timeout",
    ]


# The host mounts the task's tests here read-only: the only conftest files that are task code.
TESTS_ROOT = "/tests"


# conftest.py files outside the tests that pytest asked for and was refused, in order.
REFUSED_CONFTESTS: list[str] = []


def _say_refused(tests_root: str = TESTS_ROOT) -> None:
    for path in REFUSED_CONFTESTS:
        print(
            f"depthtui-runner: {path} is not the task's (outside {tests_root}); not loaded",
            file=sys.stderr,
        )


def _guard_conftests(tests_root: str = TESTS_ROOT) -> None:
    """Load a conftest.py only from the task's own tests (the read-only mount at `tests_root`,
    which the agent never reached); one anywhere else (the agent's home or workdir, "/") could
    be the agent's and is never imported: pytest sees an empty module in its place, so its
    fixtures and hooks are simply absent (said on stderr). Wraps pytest's own importer, which
    every conftest passes through whatever the import mode (pytest 7.2, the toolchain's)."""
    from _pytest.config import PytestPluginManager

    original = PytestPluginManager._importconftest
    if getattr(original, "_depthtui_guard", False):
        return
    root = os.path.realpath(tests_root)

    def guarded(self, conftestpath, *args, **kwargs):  # type: ignore[no-untyped-def]
        real = os.path.realpath(str(conftestpath))
        if real == root or real.startswith(root + os.sep):
            return original(self, conftestpath, *args, **kwargs)
        import types

        # Said once pytest is done (_say_refused): while it runs, it captures stderr.
        if str(conftestpath) not in REFUSED_CONFTESTS:
            REFUSED_CONFTESTS.append(str(conftestpath))
        return types.ModuleType("depthtui_refused_conftest")

    guarded._depthtui_guard = True  # type: ignore[attr-defined]
    PytestPluginManager._importconftest = guarded  # type: ignore[method-assign]


def _pytest_args(rootdir: str, timeout: float, paths: list[str]) -> list[str]:
    import tempfile

    # tmp_path lives under a fresh folder with a random name: nothing the agent left in /tmp
    # (a planted pytest-of-<user> tree, a symlink) is reused.
    basetemp = os.path.join(tempfile.mkdtemp(prefix="depthtui-"), "tmp")
    return [
        *_isolation_args(rootdir),
        "--basetemp",
        basetemp,
        "--timeout",
        str(timeout),
        "--timeout-method",
        "signal",
        "-q",
        "-rN",
        *paths,
    ]


def _leave_unusable_cwd() -> bool:
    """Start in "/" when the working folder (the agent's home) cannot be entered: the agent may
    have left it so (`chmod 000 ~`), and pytest changes back into its start folder when it ends,
    which would crash the runner. The tests then meet the unreadable home and fail, as they
    should: the state is the agent's (docs/outcomes.md)."""
    try:
        usable = os.access(os.getcwd(), os.X_OK)
    except OSError:
        usable = False
    if not usable:
        os.chdir("/")
    return not usable


def run_signed(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="depthtui-runner")
    parser.add_argument("--rootdir", default="/tests")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args(argv)

    if not _make_undumpable():
        print("depthtui-runner: could not make the runner non-dumpable", file=sys.stderr)
        return EXIT_DUMPABLE
    secret = _read_secret()
    if secret is None:
        print("depthtui-runner: no valid secret on stdin", file=sys.stderr)
        return EXIT_USAGE
    record_fd = os.dup(1)  # non-inheritable: programs the tests start never get it
    os.dup2(2, 1)
    _scrub_environment()
    _use_toolchain_packages()

    collector = Collector()
    record: dict = {"v": RECORD_VERSION, "internal_error": None}
    record["cwd_unusable"] = _leave_unusable_cwd()
    try:
        import pytest

        record["pytest"] = pytest.__version__
        _guard_conftests(args.rootdir)
        paths = args.paths or [args.rootdir]
        status = pytest.main(_pytest_args(args.rootdir, args.timeout, paths), plugins=[collector])
        record["exitstatus"] = int(status)
        _say_refused(args.rootdir)
    except BaseException as exc:
        record["exitstatus"] = None
        record["internal_error"] = f"{type(exc).__name__}: {exc}"[:MESSAGE_LIMIT]
    record.update(
        collected=collector.collected,
        collect_errors=collector.collect_errors,
        tests=[{"nodeid": k, **v} for k, v in collector.tests.items()],
        refused_conftests=REFUSED_CONFTESTS[:20],
        python=sys.version.split()[0],
        dumpable=0,
    )
    os.write(record_fd, (encode_record(secret, record) + "\n").encode())
    os.close(record_fd)
    return 0


def run_plain(argv: list[str]) -> int:
    _scrub_environment()
    _use_toolchain_packages()
    import importlib.util

    import pytest

    plugins = ["-p", CTRF_PLUGIN] if importlib.util.find_spec("ctrf") is not None else []
    _guard_conftests()
    collector = Collector()
    record: dict = {"v": RECORD_VERSION, "argv": argv[:50], "internal_error": None}
    status = 3
    try:
        # The caller's own options come last, so its -c or --rootdir win over ours.
        status = int(
            pytest.main(
                [*_isolation_args("/tests"), *plugins, *argv],
                plugins=[collector, _report_times(pytest)],
            )
        )
        record["exitstatus"] = status
        _say_refused()
    except BaseException as exc:
        record["exitstatus"] = None
        record["internal_error"] = f"{type(exc).__name__}: {exc}"[:MESSAGE_LIMIT]
    record.update(
        collected=collector.collected,
        collect_errors=collector.collect_errors,
        tests=[{"nodeid": k, **v} for k, v in collector.tests.items()],
    )
    _write_plain_record(record)
    return status


def _report_times(pytest) -> object:
    """A plugin giving each report the `start`/`stop` that pytest-json-ctrf reads: pytest added
    them to TestReport after 7.2, the toolchain's release; its CallInfo has had them long."""

    class ReportTimes:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            result = yield
            report = result.get_result()
            if not hasattr(report, "start"):
                report.start, report.stop = call.start, call.stop

    return ReportTimes()


def _write_plain_record(record: dict) -> None:
    """One file per pytest run, named so that runs sort in the order they ended; written to a
    temporary name first so the host never reads half a record."""
    import time

    if not os.path.isdir(RESULTS_DIR):
        return
    name = f"{time.time_ns():020d}-{os.getpid()}.json"
    tmp = os.path.join(RESULTS_DIR, "." + name)
    try:
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(RESULTS_DIR, name))
    except OSError as exc:
        print(f"depthtui-runner: could not write the per-test record: {exc}", file=sys.stderr)


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--plain"]:
        return run_plain(argv[1:])
    return run_signed(argv)


if __name__ == "__main__":
    sys.stdout.flush()
    # os._exit: no atexit hooks or finalizers that tests registered run after the record.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

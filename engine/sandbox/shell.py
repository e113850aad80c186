"""The agent's bash tool: one persistent bash per episode on one attached exec stream.

How a command travels (the framing never depends on what the command prints):

1. The shell runs one command loop, parsed once when it starts, inside a group whose
   redirections give every command /dev/null for stdin: the frames come on bash's own copy of
   the exec's stdin (a descriptor it keeps closed on exec, so no child inherits it). The loop
   reads a frame's fixed-size header (the payload's length and a flag), then exactly that many
   bytes of payload, and decodes it; then `eval` runs it at top level (so `declare`, `cd` and
   variables behave as typed) with stderr merged into stdout. The payload is the command with
   every byte outside printable ASCII (and the backslash) written as `\\xHH`: no newlines, as
   many characters as bytes in any locale, so a 100 KB command arrives intact with no
   line-length limit.
2. The loop then reads the nonce that follows the payload in bash's input, which stays unread
   until the command has finished, and prints the end mark: `\\x1e<nonce>\\x1d<exit code>
   <cwd>\\0` on stdout where the command's output stops; when the shell's stdout is no longer
   the exec's stdout pipe, also `\\x1e<nonce> <exit code> <where> <cwd>\\0` on stderr (`where`
   the stdout mark went: c closed, r redirected), a separate stream of the exec that the
   command's own (merged) output never reaches.
   The nonce is fresh for every command and, while the command runs, exists only in the host and
   in the part of bash's input not yet read: not in the environment, a file or a variable. Text
   the command prints, a guessed marker included, cannot end it early. (A process that
   deliberately reads the rest of its parent shell's input through /proc could learn it; it runs
   as the same uid as the shell, which no design with the shell as the agent's own user can
   prevent.)
3. Unless the container was quiet after the last command (the host read from its cgroup that
   it held exactly the processes it had when its first shell started), the loop first prints a
   start mark on stderr (the newest pid): it tells a command that never ended from a shell
   killed before it read the command, and which processes a timeout must kill.

On a timeout the command's processes (descendants of the shell newer than the command) are killed
from a root exec, so bash, its cwd and its variables survive; only when bash itself is busy (a
shell loop, a builtin blocked on a fifo) is it killed and replaced in its last cwd. A shell that
exits or is killed is replaced in its last known cwd. Every such event is said in the note.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path

import docker

from engine.sandbox import procs
from engine.sandbox.base import CallResult, ExecResult, SandboxError
from engine.sandbox.disk import DiskWatch
from engine.sandbox.dockerapi import (
    STDERR,
    STDOUT,
    ExecStream,
    create_exec,
    engine_is_local,
    start_exec,
)
from engine.sandbox.output import BoundedCapture, model_text, observation

# (user, argv, timeout=...) -> ExecResult: a separate exec, never the agent's shell.
ExecAs = Callable[..., ExecResult]

# After the kill on a timeout, how long bash gets to come back before it is replaced.
KILL_GRACE_S = 2.0
# Once the end mark on stderr arrived, how long the stdout mark may lag behind it (the engine
# copies the two streams independently).
STDOUT_LAG_S = 2.0
# While a command runs silently, how often to ask the engine whether the shell still lives (a
# background process holding the output open hides the shell's death from the stream).
LIVENESS_EVERY_S = 1.0
READY_TIMEOUT_S = 30.0
_STDERR_KEEP = 64 * 1024
_LISTING_MAX = 1 << 16  # a longer cgroup.procs is not a quiet container
_MAX_NAMES = 8

_LOST_OLD = "variables, functions and options set in the old shell"
NONCE_BYTES = 16  # random bytes per command, sent as hex
NONCE_CHARS = 2 * NONCE_BYTES
LENGTH_DIGITS = 9  # a command's length in its frame's header; longer commands are refused

_NEEDS_ESCAPE = re.compile(rb"[^\x20-\x5b\x5d-\x7e]")
_START_MARK = re.compile(rb"\x1fstart (\d+)\0")


def encode_payload(command: str) -> bytes:
    """The command as printable ASCII that bash's `printf %b` turns back into the same bytes."""
    if command.isascii() and command.isprintable() and "\\" not in command:
        return command.encode()  # most commands: nothing to escape
    data = command.encode("utf-8", errors="surrogateescape")
    return _NEEDS_ESCAPE.sub(lambda m: b"\\x%02x" % m.group()[0], data)


# What a command costs is what crosses the Docker engine and what bash interprets on the way:
# every write bash makes to the exec's stdout or stderr is one frame the engine relays and the
# host wakes up for, and every statement of the framing lies on the round trip. Measured on the
# shell's bash from the host (/proc/<pid>/stat, strace -c, perf): the time was bash's own
# interpreting, most of it calling shell functions (bash copies a function's whole body at every
# call) and redirections (about ten system calls each), not the system calls themselves. So:
# - the common path is written out in the loop itself, parsed once; functions are called only
#   on the rare paths (a start mark, a status to give back, a stdout gone elsewhere, set -x);
# - the shell runs inside one group whose redirections, made once, give every command
#   /dev/null for stdin: bash keeps the exec's stdin and stdout in descriptors of its own
#   (>= 10, closed on exec, so no child inherits them), found once by `-ef` and read with
#   `read -u`. Each command keeps one redirection, `2>&1`, so that its stderr joins its
#   output while the framing's own trace under `set -x` stays on the exec's stderr;
# - one write per command in the common case: the end mark on stdout with the exit code; then
#   `-ef` (two stats) tells that stdout is still the exec's pipe, and only when it is not (the
#   command ran `exec >file` or closed it) does a second mark go out on stderr;
# - `read -N` reads a pipe in one system call (a line is read a byte per call) and never splits
#   on IFS; `printf %b` runs only when the header says the payload holds an escape;
# - the start mark (the newest pid, on stderr, before the command runs) is needed only where
#   other processes of the agent could kill the shell between two commands or could be taken
#   for the command's: the host leaves it out when the container was quiet after the last
#   command, which it reads itself (PersistentShell._quiet_now), so bash spends nothing on it.
# `\builtin` keeps an agent's alias or function named read/printf/eval from changing the
# framing (not a function named `builtin` itself, nor `enable -n`: the agent breaking its own
# shell that way costs its command a timeout, and the shell is replaced); the functions and
# the descriptors' numbers are read-only. A framing variable the agent made read-only ends the
# shell (which is then replaced) rather than skew the framing: every read into one is
# `|| exit 125`, and an assignment to one gives up the `eval` the loop runs in, after which the
# group exits. (At top level such an error would give up the whole group and leave bash
# reading the frames as its script: so the loop always runs in `eval`.) Each is written before
# the end mark goes out: a shell that ends then ends with the command it was running, never
# after it reported (the host would take the next command's lost start for that command's
# doing). For the same reason the shell ends, before the mark, when the command's stderr could
# not be given back (the command closed or replaced the copy bash saved for it): the marks on
# stderr would be lost, or land in the output. bash's own descriptors take the lowest free
# numbers from 10 up (the frames, stdout, stderr, and one saved around each command): an agent
# that uses those numbers itself breaks its shell, which ends and is replaced.
_END = r"""
    case $__dt_xv in *[xv]*) { \builtin set +xv; } 2>/dev/null ;; esac
    __dt_open= __dt_h= __dt_c=
    \builtin read -r -N NONCE_CHARS -u "$__dt_in" __dt_n || \builtin exit 125
    [[ /proc/$$/fd/2 -ef /proc/$$/fd/$__dt_err ]] || \builtin exit 125  # (see above)
    \builtin printf '\036%s\035%s %s\0' "$__dt_n" "$__dt_rc" "$PWD" || :  # (set -e)
    [[ /proc/$$/fd/1 -ef /proc/$$/fd/$__dt_out ]] || \__depthtui_elsewhere
    case $__dt_xv in *[xv]*) \__depthtui_xv ;; esac"""
# The command loop, parsed once, and again only after a command's `break` left it. A command's
# `continue` or `break` skips the loop's own end: the next pass (or `__depthtui_end` after the
# loop) ends that command instead. An arithmetic `for` needs no command to decide whether to
# go on. The command's `$?` is the previous command's status, as a terminal would show (not
# under `set -e`, where giving it back would end the shell).
_LOOP = r"""for ((;;)); do
    case ${__dt_open-} in 1) \__depthtui_end 0 "$-" ;; esac
    \builtin read -r -N HEADER_CHARS -u "$__dt_in" __dt_h ||
        { (( $? > 128 )) && continue; \builtin exit "${__dt_rc:-0}"; }  # (TMOUT; the end)
    case ${__dt_h:LENGTH_DIGITS} in [13]) ;; *) \__depthtui_start ;; esac  # (bit 0: quiet)
    __dt_open=1
    \builtin read -r -N "${__dt_h:0:LENGTH_DIGITS}" -u "$__dt_in" __dt_c || \builtin exit 125
    case ${__dt_h:LENGTH_DIGITS} in [23]) \builtin printf -v __dt_c %b "$__dt_c" ;; esac
    case $__dt_rc$- in 0*|*e*) ;; *) \__depthtui_status "$__dt_rc" ;; esac
    \builtin eval "$__dt_c" 2>&1
    __dt_rc=$? __dt_xv=$-END
done; \__depthtui_end $? "$-"; \builtin eval "$__dt_loop"
"""
_FUNCTIONS = r"""
__depthtui_end() {
    __dt_rc=$1 __dt_xv=$2END
}
__depthtui_elsewhere() {
    # The end mark went elsewhere, or may have: where it went (c the shell's stdout is closed;
    # r it is another file, which may still lead back to us, as `exec > >(tee log)` does), and
    # the exit code, on the exec's stderr.
    if [[ -e /proc/$$/fd/1 ]]; then
        \builtin printf '\036%s %s r %s\0' "$__dt_n" "$__dt_rc" "$PWD" >&2
    else
        \builtin printf '\036%s %s c %s\0' "$__dt_n" "$__dt_rc" "$PWD" >&2
    fi
}
__depthtui_xv() {
    case $__dt_xv in *x*) \builtin set -x ;; esac
    case $__dt_xv in *v*) \builtin set -v ;; esac
}
__depthtui_start() {
    __dt_lp=; IFS=' ' \builtin read -r -u 3 _ _ _ _ __dt_lp 3</proc/loadavg
    \builtin printf '\037start %s\0' "${__dt_lp:-0}" >&2
}
__depthtui_status() { \builtin return "$1"; }
__dt_rc=0 __dt_open= __dt_xv= __dt_n= __dt_h= __dt_c= __dt_in= __dt_out= __dt_err=
__dt_loop='QUOTED_LOOP'
{
    # 4, 5 and 6 are plain copies of the exec's stdin, stdout and stderr, only to find bash's.
    for __dt_f in {10..40}; do
        [[ -z $__dt_in && /proc/$$/fd/$__dt_f -ef /proc/$$/fd/4 ]] && __dt_in=$__dt_f
        [[ -z $__dt_out && /proc/$$/fd/$__dt_f -ef /proc/$$/fd/5 ]] && __dt_out=$__dt_f
        [[ -z $__dt_err && /proc/$$/fd/$__dt_f -ef /proc/$$/fd/6 ]] && __dt_err=$__dt_f
    done
    exec 4<&- 5>&- 6>&-  # (not `builtin exec`: its redirections would last only as long as it)
    \builtin unset __dt_f
    if [[ -z $__dt_in || -z $__dt_out || -z $__dt_err ]]; then
        \builtin printf 'depthtui: bash kept no copy of its stdin, stdout or stderr\n' >&2
        \builtin exit 126
    fi
    \builtin readonly -f __depthtui_end __depthtui_elsewhere __depthtui_xv __depthtui_start \
        __depthtui_status
    \builtin readonly __dt_loop __dt_in __dt_out __dt_err
    \builtin printf '\036ready %s\0' "$$" >&2
    \builtin eval "$__dt_loop"
    \builtin exit 125
} 4<&0 5>&1 6>&2 0</dev/null 1>&5 2>&6
"""
_LOOP = _LOOP.replace("END", _END)
_FUNCTIONS = _FUNCTIONS.replace("END", _END)
_FUNCTIONS = _FUNCTIONS.replace("QUOTED_LOOP", _LOOP.replace("'", "'\\''"))
for _name, _value in {
    "NONCE_CHARS": str(NONCE_CHARS),
    "HEADER_CHARS": str(LENGTH_DIGITS + 1),
    "LENGTH_DIGITS": str(LENGTH_DIGITS),
}.items():
    _FUNCTIONS = _FUNCTIONS.replace(_name, _value)
_SHELL_SOURCE = _FUNCTIONS.encode()


def _frame(payload: bytes, nonce: bytes, quiet: bool) -> bytes:
    """One command for the shell: a fixed-size header (the payload's length, then a flag: bit 0
    set when the container was quiet after the last command, so no start mark; bit 1 when the
    payload holds an escape for `printf %b` to decode), the payload, the nonce.

    The shell parses its command loop once (`__dt_loop`) and then takes each part with
    `read -N`, one read each: bash reads a pipe one byte per system call while it parses, so
    parsing a line per command cost more than anything else bash did for it. The nonce stays
    unread (and unseen) until the loop reads it once the command has finished."""
    flag = quiet + 2 * (b"\\" in payload)
    return b"%0*d%d%s%s" % (LENGTH_DIGITS, len(payload), flag, payload, nonce)


class _Outcome:
    """What one command's stream produced, filled in as frames arrive."""

    def __init__(self, nonce: bytes) -> None:
        self.capture = BoundedCapture()
        self.mark = b"\x1e" + nonce
        self.err_mark = self.mark + b" "
        self._carry = b""
        self._err = bytearray()
        self.out_done = False
        self.exit_code: int | None = None
        self.cwd: str | None = None
        self.last_pid: int | None = None  # the newest pid when the command began
        self.err_lost = False  # the stdout mark came and the stderr mark never did
        self.out_closed = False  # the command closed the shell's own stdout (`exec 1>&-`)
        self.out_elsewhere = False  # the shell's stdout is another file the command chose
        self.unsent = False  # the shell did not take the whole command before the deadline

    @property
    def done(self) -> bool:
        return self.out_done and self.exit_code is not None

    def stdout(self, data: bytes) -> None:
        if self.out_done:
            # Late output of a background process: it belongs to nobody; keep it with this call.
            self.capture.write(data)
            return
        if self._carry:
            data = self._carry + data
            self._carry = b""
        at = data.find(self.mark)
        if at < 0:
            keep = len(self.mark) - 1
            self.capture.write(data[: len(data) - keep])
            self._carry = data[len(data) - keep :]
            return
        self.capture.write(data[:at])
        kind = data[at + len(self.mark) : at + len(self.mark) + 1]
        rest = at + len(self.mark) + 1
        if kind == b"\x1d":  # the output ends here, and this says how: `code cwd\0`
            end = data.find(b"\0", rest)
            if end < 0:
                self._carry = data[at:]  # the rest of the mark is still on its way
                return
            code, _, cwd = data[rest:end].partition(b" ")
            self._finish(code, cwd)
            self.out_done = True
            self.capture.write(data[end + 1 :])
        elif not kind:
            self._carry = data[at:]
        else:  # not a mark of ours (the nonce is never followed by anything else)
            self.capture.write(data[at : at + 1])
            self.stdout(data[at + 1 :])

    def _finish(self, code: bytes, cwd: bytes) -> None:
        self.exit_code = int(code) if code.strip().lstrip(b"-").isdigit() else -1
        self.cwd = cwd.decode("utf-8", "surrogateescape")

    def flush(self) -> None:
        self.capture.write(self._carry)
        self._carry = b""

    def stderr(self, data: bytes) -> None:
        # Only the end mark matters here; anything else on the shell's own stderr is bash talking
        # about the framing (set -v echoes, warnings), not the command's output.
        if self.exit_code is not None:
            return
        self._err += data
        if self.last_pid is None:
            m = _START_MARK.search(self._err)
            if m:
                self.last_pid = int(m.group(1))
        at = self._err.find(self.err_mark)
        if at < 0:
            if len(self._err) > _STDERR_KEEP:
                del self._err[: len(self._err) - _STDERR_KEEP]
            return
        end = self._err.find(b"\0", at)
        if end < 0:
            return
        code, where, cwd = bytes(self._err[at + len(self.err_mark) : end]).split(b" ", 2)
        self._finish(code, cwd)
        if where == b"c":  # the stdout mark cannot come: no lag to wait
            self.out_done = self.out_closed = True
        # Redirected: the mark may still come through whatever stdout now is; if it does not,
        # the agent sent its stdout elsewhere on purpose and can restore it (`exec >&7`).
        self.out_elsewhere = where == b"r"


class PersistentShell:
    """One bash as the agent user inside a running container."""

    def __init__(
        self,
        api: docker.APIClient,
        container_id: str,
        *,
        user: str,
        env: dict[str, str],
        workdir: str,
        home: str,
        exec_as: ExecAs,
        default_timeout: float = 30.0,
    ) -> None:
        self.api = api
        self.container_id = container_id
        self.user = user
        self.env = dict(env)
        self.workdir = workdir
        self.home = home
        self.exec_as = exec_as
        # Boot-clock time the running command began: its processes are those started since.
        self._began_boot = 0.0
        self.default_timeout = default_timeout
        self.cwd = workdir
        self.pid: int | None = None
        self._exec_id: str | None = None
        self._stream: ExecStream | None = None
        self._ended_note = ""
        # The container was quiet after the last command: the next has no start mark.
        self._quiet = False
        self._first = True  # no shell was started in this container yet
        # The container's cgroup.procs in the unified hierarchy, when this host has one
        # (freezer.HostView.unified): how the host tells that the container is quiet, read
        # through one descriptor kept open. Without it no command is taken as quiet.
        self.procs_file: Path | None = None
        self._procs_fd: int | None = None
        # What it listed once the container's first shell was ready: the processes it was set
        # up with. A later shell may share the container with what its predecessor left
        # running, so only the first one's listing can say what quiet is.
        self._base: frozenset[bytes] | None = None
        self.disk_watch: DiskWatch | None = None  # its note joins the next observation
        # (shell pid, last pid, start tick) -> killed: the timeout's kill from the host, when
        # the sandbox can do it (freezer.py); else a root exec inside the container does it.
        self.host_kill: Callable[[int, int | None, int | None], list[tuple[int, str]]] | None = None

    # --- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start bash in the last known cwd (falling back to the workdir, the home, then /)."""
        self._drop_stream()
        tried = []
        for cwd in dict.fromkeys([self.cwd, self.workdir, self.home, "/"]):
            try:
                self._start_in(cwd)
                self.cwd = cwd
                return
            except SandboxError as exc:
                tried.append(f"{cwd}: {exc.detail}")
        raise SandboxError("shell", "bash could not be started: " + "; ".join(tried))

    def _start_in(self, cwd: str) -> None:
        try:
            exec_id = create_exec(
                self.api,
                self.container_id,
                ["bash", "--noprofile", "--norc"],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                user=self.user,
                environment=[f"{k}={v}" for k, v in self.env.items()],
                workdir=cwd,
            )
        except docker.errors.NotFound:
            raise SandboxError("container", f"container {self.container_id[:12]} is gone") from None
        except docker.errors.APIError as exc:
            raise SandboxError("shell", exc.explanation or str(exc)) from None
        stream = start_exec(self.api, exec_id)
        stream.send(_SHELL_SOURCE)
        said = bytearray()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            frames = stream.read(deadline - time.monotonic())
            if frames is None:
                break
            for kind, data in frames:
                said += data
                if kind == STDERR:
                    m = re.search(rb"\x1eready (\d+)\0", said)
                    if m:
                        self.pid = int(m.group(1))
                        self._exec_id = exec_id
                        self._stream = stream
                        self._rebase()
                        self._first = False
                        return
        stream.close()
        text = bytes(said).decode("utf-8", "replace").strip()[-500:]
        raise SandboxError("shell", text or "bash did not answer")

    def close(self) -> None:
        self._drop_stream()
        if self._procs_fd is not None:
            os.close(self._procs_fd)
            self._procs_fd = None

    def _drop_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._stream = None
        self._quiet = False
        self._exec_id = None
        self.pid = None

    def _listing(self) -> frozenset[bytes] | None:
        """The container's processes (host pids) as its cgroup.procs lists them now; None when
        it cannot be read."""
        try:
            if self._procs_fd is None:
                if self.procs_file is None:
                    return None
                self._procs_fd = os.open(self.procs_file, os.O_RDONLY)
            data = os.pread(self._procs_fd, _LISTING_MAX, 0)
        except OSError:
            return None
        return None if len(data) >= _LISTING_MAX else frozenset(data.split())

    def _rebase(self) -> None:
        """What quiet is, read once a shell is ready: the first shell's container as it was set
        up; after a replacement, the same with the new shell in place of the old one (exactly
        one process gone and one new), else nothing is quiet any more."""
        listing, base = self._listing(), self._base
        replaced = (
            listing is not None
            and base is not None
            and len(listing - base) == len(base - listing) == 1
        )
        self._base = listing if self._first or replaced else None

    def _quiet_now(self) -> bool:
        """The container holds exactly the processes it was set up with (its first shell
        included): no process of the agent is left that could end the shell before the next
        command or be taken for that command's."""
        return self._base is not None and self._listing() == self._base

    def _alive(self) -> tuple[bool, int | None]:
        if self._exec_id is None:
            return False, None
        try:
            info = self.api.exec_inspect(self._exec_id)
        except docker.errors.APIError:
            return False, None
        return bool(info.get("Running")), info.get("ExitCode")

    # --- one command ------------------------------------------------------------------------

    def abandon(self, reason: str) -> None:
        """The harness ended the shell (say, by killing every agent process): drop it and its
        stream; the next command starts a new shell and its note says `reason`."""
        self._drop_stream()
        self._ended_note = reason

    def run(self, command: str, timeout: float | None = None) -> CallResult:
        timeout = self.default_timeout if timeout is None else timeout
        began = time.monotonic()
        if "\0" in command:
            return _refused(command, "a NUL byte (bash cannot hold one in a command)")
        if len(command) * 4 >= 10**LENGTH_DIGITS:  # up to four bytes of payload per character
            return _refused(command, f"more than {10**LENGTH_DIGITS // 4:,} characters")
        notes: list[str] = []
        restarted = False
        if self._stream is None and self._ended_note:
            notes.append(f"{self._ended_note}; " + self._restart_note(None, _LOST_OLD))
            restarted = True
        elif self._stream is None:
            self.start()
        self._ended_note = ""
        outcome, died = self._send(command, began + timeout)
        if died and outcome.last_pid is None:
            # The shell had ended before it read the command (a background `kill $$`, say):
            # nothing of the command ran, so it runs once in the replacement.
            said = self._replace_after_death()[1]
            notes.append(f"before this command, {said}")
            restarted = True
            outcome, died = self._send(command, began + timeout)

        timed_out = False
        exit_code = outcome.exit_code
        if outcome.unsent:
            # Not even the whole command went in within the timeout: the shell was not reading
            # (stopped, or still in a builtin of the last command), so nothing of it ran.
            timed_out = restarted = True
            cwd = self._kill_shell()
            notes.append(
                f"the shell did not take the command within {timeout:g} s, so it never ran; "
                "the shell was killed and "
                + self._restart_note(cwd, "variables, functions and options set in it")
            )
        elif died:
            restarted = True
            exit_code, said = self._replace_after_death()
            notes.append(said)
        elif (
            outcome.err_lost
            or outcome.out_closed
            or (
                outcome.exit_code is not None and not outcome.out_done and not outcome.out_elsewhere
            )
        ):
            # The shell's own stdout or stderr no longer reaches us (`exec 1>&-`, or stdout
            # redirected where we cannot tell): every later command would come back empty or
            # never end. A stdout the command redirected to a file (`exec >f`) is the agent's
            # choice and can be restored (`exec >&7`): that shell is kept.
            lost = "standard error" if outcome.err_lost else "standard output"
            restarted = True
            cwd = self._kill_shell()
            notes.append(
                f"the command closed or redirected the shell's own {lost}, so the shell could "
                "no longer report; it was killed and "
                + self._restart_note(cwd, "variables, functions and options set in it")
            )

        elif outcome.exit_code is None:
            timed_out = True
            exit_code = None
            killed = self._kill_command(outcome.last_pid)
            died = self._pump(outcome, time.monotonic() + KILL_GRACE_S)
            what = f"the command timed out after {timeout:g} s; {_killed(killed)}"
            if outcome.exit_code is not None:
                notes.append(
                    f"{what}; the shell survived: its working directory and variables are kept"
                )
            elif died:
                restarted = True
                notes.append(f"{what}; " + self._replace_after_death()[1])
            else:
                restarted = True
                cwd = self._kill_shell()
                notes.append(
                    f"{what}; the shell itself stayed busy (a shell loop or a builtin), so it "
                    "was killed too; "
                    + self._restart_note(cwd, "variables, functions and options set in it")
                )
        outcome.flush()
        if outcome.cwd:
            self.cwd = outcome.cwd
        self._quiet = not restarted and not timed_out and self._quiet_now()
        if self.disk_watch is not None and (disk := self.disk_watch.take_note()):
            notes.append(disk)
        capture = outcome.capture
        note = "; ".join(notes)
        return CallResult(
            command=command,
            output=capture.data(),
            output_bytes=capture.total,
            exit_code=exit_code,
            timed_out=timed_out,
            duration_s=time.monotonic() - began,
            shell_restarted=restarted,
            note=note,
            observation=observation(
                model_text(capture.head, capture.tail, capture.total) if capture.total else "",
                exit_code,
                timed_out,
                note,
            ),
        )

    def _send(self, command: str, deadline: float) -> tuple[_Outcome, bool]:
        """Hand the command to the shell and follow it until done or the deadline."""
        stream = self._stream
        assert stream is not None
        nonce = secrets.token_hex(NONCE_BYTES).encode()
        quiet, self._quiet = self._quiet, False
        self._began_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        unsent = False
        try:
            stream.send(_frame(encode_payload(command), nonce, quiet), deadline)
            sent = True
        except SandboxError:
            sent = False
        except TimeoutError:
            sent, unsent = False, True
        # Built while the shell runs the command: nothing here is needed to send it.
        outcome = _Outcome(nonce)
        if quiet:
            # No process of the agent was left after the last command: nothing but this command
            # can end the shell now, and every process under the shell will be the command's.
            outcome.last_pid = 0
        if unsent:
            outcome.unsent = True
            return outcome, False
        if not sent:
            return outcome, True
        return outcome, self._pump(outcome, deadline)

    def _pump(self, outcome: _Outcome, deadline: float) -> bool:
        """Read frames until the command is done or the deadline passes; True if the shell died
        (its stream ended or the engine says its process is gone)."""
        stream = self._stream
        assert stream is not None
        quiet_since = time.monotonic()
        stderr_done_at: float | None = None
        while not outcome.done:
            now = time.monotonic()
            if now >= deadline:
                return False
            if outcome.exit_code is not None or outcome.out_done:
                # One end mark came; the other may lag a little, or never come if the command
                # closed or redirected the shell's stdout or stderr for good (exec >file).
                stderr_done_at = stderr_done_at or now
                if now - stderr_done_at > STDOUT_LAG_S:
                    outcome.err_lost = outcome.exit_code is None
                    return False
            wait = min(deadline - now, LIVENESS_EVERY_S)
            if stderr_done_at is not None:
                wait = min(wait, stderr_done_at + STDOUT_LAG_S - now + 0.01)
            frames = stream.read(wait)
            if frames is None:
                return True
            if frames:
                quiet_since = time.monotonic()
                for kind, data in frames:
                    if kind == STDOUT:
                        outcome.stdout(data)
                    elif kind == STDERR:
                        outcome.stderr(data)
            elif time.monotonic() - quiet_since >= LIVENESS_EVERY_S:
                quiet_since = time.monotonic()
                alive, _ = self._alive()
                if not alive:
                    self._drain(outcome)
                    return True
        return False

    def _drain(self, outcome: _Outcome) -> None:
        """Take what is already waiting on a dead shell's stream, without blocking."""
        stream = self._stream
        while stream is not None:
            frames = stream.read(0.05)
            if not frames:
                return
            for kind, data in frames:
                if kind == STDOUT:
                    outcome.stdout(data)

    def _replace_after_death(self) -> tuple[int | None, str]:
        """Start a new shell after the old one ended; its exit status and what to tell."""
        alive, code = self._alive()
        for _ in range(20):
            if not alive and code is not None:
                break
            time.sleep(0.05)
            alive, code = self._alive()
        if code is not None and 128 < code <= 128 + _SIGNALS:
            how = f"the shell was killed (signal {code - 128})"
        elif code is not None:
            how = f"the shell exited with code {code}"
        else:
            how = "the shell ended"
        return code, f"{how}; " + self._restart_note(self.cwd, _LOST_OLD)

    def _restart_note(self, cwd: str | None, lost: str) -> str:
        if cwd:
            self.cwd = cwd
        wanted = self.cwd
        self.start()
        where = f"in {self.cwd}"
        if self.cwd != wanted:
            where += f" ({wanted} no longer exists)"
        return f"a new shell was started {where}; {lost} are lost"

    def _kill_command(self, last_pid: int | None) -> list[tuple[int, str]]:
        if self.pid is None:
            return []
        # Same kernel, same boot clock: the tick the command began in settles processes whose
        # pid wrapped around. Unknown for an engine on another machine.
        if self.host_kill is not None:
            return self.host_kill(self.pid, last_pid, int(self._began_boot * 100))
        tick = str(int(self._began_boot * 100)) if engine_is_local() else ""
        newest = 1 << 30 if last_pid is None else last_pid
        argv = procs.sh(procs.KILL_COMMAND, self.pid, newest, tick)
        return procs.parse_pids(self.exec_as("0", argv, timeout=30.0).stdout)

    def _kill_shell(self) -> str | None:
        """Kill a busy shell; where it was (its cwd), when that can be read."""
        if self.pid is None:
            return None
        where = self.exec_as(self.user, procs.sh(procs.CWD_OF, self.pid), timeout=30.0)
        self.exec_as("0", ["/bin/sh", "-c", f"kill -9 {self.pid}"], timeout=30.0)
        for line in where.stdout.decode("utf-8", "surrogateescape").splitlines():
            if line.startswith("cwd "):
                return line[4:]
        return None


# Exit statuses 129..192 are how a process killed by signal 1..64 (SIGRTMAX) shows; above that
# (a fork bomb's 254, `exit 255`) they are plain exit codes.
_SIGNALS = 64


def _refused(command: str, why: str) -> CallResult:
    note = f"not run: the command contains {why}"
    return CallResult(
        command=command,
        output=b"",
        output_bytes=0,
        exit_code=None,
        timed_out=False,
        duration_s=0.0,
        note=note,
        observation=f"[{note}]",
    )


def _killed(killed: list[tuple[int, str]]) -> str:
    if not killed:
        return "no process of it was left to kill"
    shown = ", ".join(f"{comm} (pid {pid})" for pid, comm in killed[:_MAX_NAMES])
    more = f" and {len(killed) - _MAX_NAMES} more" if len(killed) > _MAX_NAMES else ""
    return f"its processes were killed: {shown}{more}"

"""The agent's bash tool: one persistent bash per episode on one attached exec stream; how a
command travels to it and back is framing.py's.

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
from engine.sandbox.base import CallResult, ExecResult, SandboxError, ShellForgery
from engine.sandbox.disk import DiskWatch
from engine.sandbox.dockerapi import (
    STDERR,
    STDOUT,
    ExecStream,
    create_exec,
    engine_is_local,
    start_exec,
)
from engine.sandbox.framing import (
    LENGTH_DIGITS,
    NONCE_BYTES,
    SHELL_SOURCE,
    Outcome,
    encode_payload,
    frame,
)
from engine.sandbox.output import model_text, observation

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
# How long the probe after a segment's last call may take (milliseconds unless a forger holds it).
PROBE_TIMEOUT_S = 10.0
_LISTING_MAX = 1 << 16  # a longer cgroup.procs is not a quiet container
_MAX_NAMES = 8

_LOST_OLD = "variables, functions and options set in the old shell"


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
        stream.send(SHELL_SOURCE)
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
        self._check_forged(outcome)
        if died and outcome.last_pid is None:
            # The shell had ended before it read the command (a background `kill $$`, say):
            # nothing of the command ran, so it runs once in the replacement.
            said = self._replace_after_death()[1]
            notes.append(f"before this command, {said}")
            restarted = True
            outcome, died = self._send(command, began + timeout)
            self._check_forged(outcome)

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
            self._check_forged(outcome)
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

    def _send(self, command: str, deadline: float) -> tuple[Outcome, bool]:
        """Hand the command to the shell and follow it until done or the deadline."""
        stream = self._stream
        assert stream is not None
        nonce = secrets.token_hex(NONCE_BYTES).encode()
        quiet, self._quiet = self._quiet, False
        self._began_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        unsent = False
        sent_frame = frame(encode_payload(command), nonce, quiet)
        try:
            stream.send(sent_frame, deadline)
            sent = True
        except SandboxError:
            sent = False
        except TimeoutError:
            sent, unsent = False, True
        # Built while the shell runs the command: nothing here is needed to send it.
        outcome = Outcome(nonce, sent_frame)
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

    def _pump(self, outcome: Outcome, deadline: float) -> bool:
        """Read frames until the command is done or the deadline passes; True if the shell died
        (its stream ended or the engine says its process is gone)."""
        stream = self._stream
        assert stream is not None
        quiet_since = time.monotonic()
        stderr_done_at: float | None = None
        while not outcome.done and outcome.forged is None:
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

    def _drain(self, outcome: Outcome) -> None:
        """Take what is already waiting on a dead shell's stream, without blocking."""
        stream = self._stream
        while stream is not None:
            frames = stream.read(0.05)
            if not frames:
                return
            for kind, data in frames:
                if kind == STDOUT:
                    outcome.stdout(data)

    def probe(self, timeout: float = PROBE_TIMEOUT_S) -> None:
        """After a segment's last call, a frame that runs nothing (framing.frame's probe: the
        loop prints an end mark, `$?` and every trap untouched): the frame a forged mark on that
        call needs to give itself away (ShellForgery). A shell that is gone is left alone; one
        that does not answer is killed, and the next command's note says so."""
        stream = self._stream
        if stream is None:
            return
        nonce = secrets.token_hex(NONCE_BYTES).encode()
        sent = frame(b"", nonce, quiet=True, probe=True)
        outcome = Outcome(nonce, sent)
        try:
            stream.send(sent, time.monotonic() + timeout)
            died = self._pump(outcome, time.monotonic() + timeout)
        except (SandboxError, TimeoutError):
            died = True
        self._check_forged(outcome)
        if outcome.exit_code is None and not outcome.out_done:
            try:
                if not died:
                    self._kill_shell()
            except SandboxError:
                pass  # (the next command starts a new shell either way)
            self.abandon("the shell did not answer the harness between segments")

    def _check_forged(self, outcome: Outcome) -> None:
        """The loop's telltale of a forged end mark came (framing.py): the shell is dropped,
        nothing it reports can be trusted now."""
        if outcome.forged is not None:
            self._drop_stream()
            raise ShellForgery(outcome.forgery())

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

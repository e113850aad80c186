"""How one command travels to the agent's bash and back (the framing never depends on what the
command prints); PersistentShell (shell.py) sends the frames and follows the marks:

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
   the command prints, a guessed marker included, cannot end it early. (A command that
   deliberately reads the rest of the shell's input can learn it: point 3.)
3. A command runs inside this bash, so it can read its own nonce from bash's input and print a
   mark with it (a forged end mark: the host then takes the command for done and sends the next
   frame while it still runs). No channel bash reads is hidden from the command, so the forgery
   is detected instead: once the command ends, the loop reads the first bytes not yet read as
   its nonce, which are now part of the next frame, and prints a mark with them. An end mark
   whose nonce is a piece of the frame the host sent, other than its nonce, is that telltale
   (Outcome.forged): the shell raises ShellForgery and the episode is the agent's failure.
   Caught whenever the command that forged a mark lets the loop take the next bytes; not caught:
   a command that reads a later frame's header and payload itself (it imitates the loop) or
   keeps the shell busy until it is killed (docs/sandbox.md).
4. Unless the container was quiet after the last command (the host read from its cgroup that
   it held exactly the processes it had when its first shell started), the loop first prints a
   start mark on stderr (the newest pid): it tells a command that never ended from a shell
   killed before it read the command, and which processes a timeout must kill.
"""

from __future__ import annotations

import re

from engine.sandbox.output import BoundedCapture

# The shell's own stderr kept while looking for its end mark (bash's warnings, set -v).
_STDERR_KEEP = 64 * 1024
NONCE_BYTES = 16  # random bytes per command, sent as hex
NONCE_CHARS = 2 * NONCE_BYTES
LENGTH_DIGITS = 9  # a command's length in its frame's header; longer commands are refused

# An end mark as the loop prints it, up to its exit code (0 to 255 from bash; 125 its own):
# on stdout `\x1e<nonce>\x1d<code> `, on stderr `\x1e<nonce> <code> `. A frame holds only
# printable ASCII, so a nonce read from one does too.
_ANY_MARK = re.compile(rb"\x1e([\x20-\x7e]{%d})[\x1d ]\d{1,3} " % NONCE_CHARS)
_ANY_MARK_SPAN = 1 + NONCE_CHARS + 1 + 3 + 1
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
#   command, which it reads itself (PersistentShell._quiet_now in shell.py), so bash spends
#   nothing on it.
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
    case ${__dt_h:LENGTH_DIGITS} in [1357]) ;; *) \__depthtui_start ;; esac  # (bit 0: quiet)
    __dt_open=1
    \builtin read -r -N "${__dt_h:0:LENGTH_DIGITS}" -u "$__dt_in" __dt_c || \builtin exit 125
    case ${__dt_h:LENGTH_DIGITS} in [23]) \builtin printf -v __dt_c %b "$__dt_c" ;; esac
    case ${__dt_h:LENGTH_DIGITS} in
    [4-7]) __dt_xv=$- ;;  # (bit 2: the host's probe: nothing runs, the last status stays)
    *) case $__dt_rc$- in 0*|*e*) ;; *) \__depthtui_status "$__dt_rc" ;; esac
        \builtin eval "$__dt_c" 2>&1
        __dt_rc=$? __dt_xv=$- ;;
    esacEND
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
SHELL_SOURCE = _FUNCTIONS.encode()


def frame(payload: bytes, nonce: bytes, quiet: bool, probe: bool = False) -> bytes:
    """One command for the shell: a fixed-size header (the payload's length, then a flag: bit 0
    set when the container was quiet after the last command, so no start mark; bit 1 when the
    payload holds an escape for `printf %b` to decode; bit 2 for the host's probe, which runs
    nothing and only asks for an end mark), the payload, the nonce.

    The shell parses its command loop once (`__dt_loop`) and then takes each part with
    `read -N`, one read each: bash reads a pipe one byte per system call while it parses, so
    parsing a line per command cost more than anything else bash did for it. The nonce stays
    unread (and unseen) until the loop reads it once the command has finished."""
    flag = quiet + 2 * (b"\\" in payload) + 4 * probe
    return b"%0*d%d%s%s" % (LENGTH_DIGITS, len(payload), flag, payload, nonce)


class Outcome:
    """What one command's stream produced, filled in as frames arrive. `sent` is the frame the
    host sent for it: an end mark whose nonce is a piece of it is the loop's, after a forged
    mark (`forged`)."""

    def __init__(self, nonce: bytes, sent: bytes = b"") -> None:
        self.capture = BoundedCapture()
        self.nonce = nonce
        self.sent = sent
        self.forged: bytes | None = None  # the piece of `sent` the loop took for its nonce
        self._tail = {1: b"", 2: b""}  # per stream, an end mark's start cut off by a frame
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

    def _watch(self, stream: int, data: bytes) -> None:
        """Look for the loop's end mark with a piece of this frame (not wholly inside its
        payload) for its nonce. An honest command does not print one: it would have to print
        the framing's separators around part of the frame's header or of its unread nonce, with
        an exit code after them."""
        tail = self._tail[stream]
        if tail:
            data = tail + data
        elif b"\x1e" not in data:
            return
        for m in _ANY_MARK.finditer(data):
            piece = m.group(1)
            if piece != self.nonce and self._loop_could_read(piece):
                self.forged = piece
                return
        at = data.rfind(b"\x1e", max(len(data) - _ANY_MARK_SPAN, 0))
        self._tail[stream] = data[at:] if at >= 0 else b""

    def _loop_could_read(self, piece: bytes) -> bool:
        """Whether `piece` occurs in the frame sent other than wholly inside its payload. The
        loop takes its nonce from the start of the bytes left unread, so after a forged mark
        its piece begins at (or a few bytes into) the frame's header: it holds header digits
        or nonce bytes, which no command knows. A piece wholly inside the payload is text of
        the command itself, which an honest command may print after a record separator
        (`printf 'a\\x1e<32 characters of its own> 42 ...'`, data in the ASCII-delimited
        format); that is never taken for the loop's."""
        header = LENGTH_DIGITS + 1
        payload_end = len(self.sent) - NONCE_CHARS
        at = self.sent.find(piece)
        while at >= 0:
            if not (at >= header and at + len(piece) <= payload_end):
                return True
            at = self.sent.find(piece, at + 1)
        return False

    def forgery(self) -> str:
        """What the loop's telltale says (the error detail of ShellForgery)."""
        piece = (self.forged or b"").decode("ascii", "replace")
        return (
            "a command printed the shell's end mark itself (it read the nonce from the shell's "
            f"input): the shell then read the next command's frame as its nonce ({piece!r}), "
            "so that command never ran and the results reported since the forged mark are not "
            "the commands'"
        )

    def stdout(self, data: bytes) -> None:
        if self.forged is None:
            self._watch(1, data)
        self._stdout(data)

    def _stdout(self, data: bytes) -> None:
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
            self._stdout(data[at + 1 :])

    def _finish(self, code: bytes, cwd: bytes) -> None:
        self.exit_code = int(code) if code.strip().lstrip(b"-").isdigit() else -1
        self.cwd = cwd.decode("utf-8", "surrogateescape")

    def flush(self) -> None:
        self.capture.write(self._carry)
        self._carry = b""

    def stderr(self, data: bytes) -> None:
        # Only the end mark matters here; anything else on the shell's own stderr is bash talking
        # about the framing (set -v echoes, warnings), not the command's output.
        if self.forged is None:
            self._watch(2, data)
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

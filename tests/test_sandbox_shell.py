"""The agent's persistent bash, in a real container (one per module; tests that break the shell
on purpose check that it comes back, so later tests still have a working one)."""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator

import pytest

from engine.sandbox.base import ShellForgery
from engine.sandbox.containers import DockerSandbox
from engine.sandbox.framing import Outcome, frame
from engine.sandbox.output import HEAD_BYTES, HEAD_CHARS, TAIL_BYTES, TAIL_CHARS
from engine.sandbox.start import start_sandbox
from tests.fixtures_sandbox import BASE, TEST_LABELS, make_task, rss_bytes

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def sb() -> Iterator[DockerSandbox]:
    sandbox = start_sandbox(make_task(), BASE, labels=TEST_LABELS)
    try:
        yield sandbox
    finally:
        sandbox.close(remove_snapshots=True)


def test_runs_as_the_agent_in_the_workdir_with_the_tool_environment(sb: DockerSandbox) -> None:
    r = sb.run('id -u; id -g; pwd; echo "$HOME $USER $TERM $PAGER $GIT_PAGER"; echo $-')
    lines = r.output.decode().splitlines()
    assert lines[:4] == ["1000", "1000", "/home/user", "/home/user user dumb cat cat"]
    assert "i" not in lines[4]  # not an interactive shell
    assert r.exit_code == 0 and not r.timed_out and not r.shell_restarted
    assert r.observation == r.output.decode() + "[exit code 0]"


def test_cwd_and_variables_persist(sb: DockerSandbox) -> None:
    sb.run("mkdir -p /tmp/persist && cd /tmp/persist && export EXPORTED=1 && PLAIN=2")
    sb.run("declare -a ARR=(x y z); f() { echo fn-$1; }")
    r = sb.run('pwd; echo "$EXPORTED $PLAIN ${ARR[2]}"; f ok; bash -c \'echo "$EXPORTED-$PLAIN"\'')
    assert r.output.decode() == "/tmp/persist\n1 2 z\nfn-ok\n1-\n"
    sb.run("cd ~")


def test_exit_code_and_merged_stderr(sb: DockerSandbox) -> None:
    r = sb.run("echo out; echo err >&2; false")
    assert r.exit_code == 1
    assert r.output == b"out\nerr\n"
    assert sb.run("(exit 42)").exit_code == 42
    assert sb.run("echo $?").output == b"42\n"  # as a terminal would show it


def test_stdin_is_dev_null_so_read_returns_at_once(sb: DockerSandbox) -> None:
    r = sb.run("read x; echo rc=$? x=[$x]; cat; echo cat-done", timeout=10)
    assert not r.timed_out
    assert r.output.decode() == "rc=1 x=[]\ncat-done\n"


def test_timeout_kills_the_command_and_keeps_the_shell(sb: DockerSandbox) -> None:
    sb.run("cd /tmp && export KEPT=yes && LOCAL=also")
    r = sb.run("echo started; sleep 1000", timeout=1.5)
    assert r.timed_out and r.exit_code is None
    assert r.observation.startswith("started\n")
    assert "[timed out]" in r.observation
    assert "sleep (pid" in r.note and "the shell survived" in r.note
    assert not r.shell_restarted
    after = sb.run('pwd; echo "$KEPT $LOCAL"; pgrep -u 1000 -x sleep || echo no-sleep')
    assert after.output.decode() == "/tmp\nyes also\nno-sleep\n"
    sb.run("cd ~")


def test_timeout_leaves_earlier_background_jobs_alone(sb: DockerSandbox) -> None:
    sb.run("sleep 777 >/dev/null 2>&1 &")
    r = sb.run("sleep 1000 | cat", timeout=1.5)
    assert r.timed_out
    assert "sleep (pid" in r.note and "cat (pid" in r.note
    alive = sb.run(
        "pgrep -u 1000 -fx 'sleep 777' >/dev/null && echo still-there; kill %1 2>/dev/null"
    )
    assert alive.output == b"still-there\n"


def test_timeout_of_a_busy_shell_replaces_it_in_its_cwd(sb: DockerSandbox) -> None:
    sb.run("cd /var/tmp && LOST=1")
    r = sb.run("while :; do :; done", timeout=1.5)
    assert r.timed_out and r.shell_restarted
    assert "stayed busy" in r.note and "new shell was started in /var/tmp" in r.note
    assert "variables, functions and options" in r.note
    after = sb.run('pwd; echo "[${LOST:-}]"')
    assert after.output == b"/var/tmp\n[]\n"
    sb.run("cd ~")


def test_exit_is_survived_with_a_note(sb: DockerSandbox) -> None:
    sb.run("cd /tmp")
    r = sb.run("echo bye; exit 3")
    assert r.shell_restarted and r.exit_code == 3 and not r.timed_out
    assert r.output == b"bye\n"
    assert "the shell exited with code 3" in r.note
    assert "a new shell was started in /tmp" in r.note
    assert r.observation == f"bye\n[exit code 3]\n[{r.note}]"
    assert sb.run("pwd").output == b"/tmp\n"
    sb.run("cd ~")


def test_exit_is_noticed_while_a_background_job_holds_the_output(sb: DockerSandbox) -> None:
    r = sb.run("sleep 30 & exit 5", timeout=20)
    assert r.shell_restarted and r.exit_code == 5 and not r.timed_out
    assert "the shell exited with code 5" in r.note
    assert sb.run("echo fresh").output == b"fresh\n"


def test_kill_9_of_the_shell_is_survived_with_a_note(sb: DockerSandbox) -> None:
    r = sb.run("kill -9 $$")
    assert r.shell_restarted and r.exit_code == 137
    assert "the shell was killed (signal 9)" in r.note
    assert sb.run("echo back").output == b"back\n"


def test_a_100_kb_command_arrives_intact(sb: DockerSandbox) -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ019 \t'\"$`\\!*?;&|<>(){}[]#~é€😀"
    body = "".join(rng.choice(alphabet) if i % 80 else "\n" for i in range(1, 100_001))
    command = f"cat <<'DEPTHTUI_EOF' | sha256sum\n{body}\nDEPTHTUI_EOF"
    assert len(command.encode()) > 100_000
    r = sb.run(command)
    expected = hashlib.sha256((body + "\n").encode()).hexdigest()
    assert r.exit_code == 0
    assert r.output.decode().split()[0] == expected


def test_printed_end_markers_do_not_end_the_command(sb: DockerSandbox) -> None:
    # Everything an agent could print that looks like the framing: the mark bytes with guessed
    # nonces on stdout and stderr, and the same written to every fd bash might have saved.
    forge = (
        r"printf '\036%032x\037' 0; printf '\036%032x 0 /\000' 0 >&2; "
        r"for fd in 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19; do "
        r"printf '\036%032x 0 /\000\036%032x\037' 1 1 >&$fd; done 2>/dev/null; "
        "sleep 0.5; echo after-the-fakes; exit_with=7; (exit $exit_with)"
    )
    r = sb.run(forge, timeout=10)
    assert not r.timed_out and not r.shell_restarted
    assert r.exit_code == 7
    assert r.output.endswith(b"after-the-fakes\n")
    assert b"\x1e" + b"0" * 32 + b"\x1f" in r.output
    assert "\\x1e" in r.observation and "\x1e" not in r.observation


def test_the_framing_functions_cannot_be_replaced(sb: DockerSandbox) -> None:
    r = sb.run("__depthtui_end() { echo hijacked; }; unset -f __depthtui_start; echo tried")
    assert b"readonly function" in r.output and r.output.endswith(b"tried\n")
    after = sb.run("echo still-framed")
    assert after.output == b"still-framed\n" and after.exit_code == 0


def test_a_readonly_framing_variable_ends_the_shell_instead_of_skewing_the_framing() -> None:
    # Its own container: the shells it ends must not disturb the module's shared one. The names
    # are each framing variable; each is written before the command's end mark, so the command
    # that made it read-only is the one whose shell ends (never the next, which would be blamed
    # for a death before it ran). `break` first runs the loop inside eval, where an assignment
    # error gives up the eval instead of ending bash.
    box = start_sandbox(make_task(), BASE, labels=TEST_LABELS)
    try:
        for name in ("__dt_rc", "__dt_xv", "__dt_n", "__dt_open", "__dt_h", "__dt_c"):
            for before in ("", "break; "):
                if before:
                    assert box.run("break").exit_code == 0
                r = box.run(f"readonly {name}=7; echo set", timeout=10)
                assert not r.timed_out, (name, before, r)
                assert r.output == b"set\n" and r.shell_restarted, (name, before, r)
                assert "shell exited" in r.note, (name, before, r.note)
                after = box.run("echo fresh")
                assert after.output == b"fresh\n" and after.exit_code == 0
    finally:
        box.close()


def test_commands_see_only_their_three_standard_descriptors(sb: DockerSandbox) -> None:
    # The frames and the exec's own stdout and stderr stay in bash's descriptors, closed on
    # exec: a child sees 0, 1 and 2 (and `ls` its own listing of /proc/self/fd).
    r = sb.run("ls /proc/self/fd; readlink /proc/self/fd/0")
    names = r.output.decode().split()
    assert sorted(names[:-1], key=int) == ["0", "1", "2", "3"] and names[-1] == "/dev/null"


def test_the_shell_survives_the_agent_breaking_its_stderr_timeout_and_input() -> None:
    # Its own container: every step here ends or stops the shell on purpose.
    box = start_sandbox(make_task(), BASE, labels=TEST_LABELS)
    try:
        assert box.run("sleep 1000 &").exit_code == 0  # not quiet: the start mark is needed
        # Close the copy of the exec's stderr bash saved around this command: its stderr
        # cannot be given back, so the shell ends with this command, before reporting it.
        close = (
            'for f in /proc/$$/fd/*; do n=${f##*/}; [[ $n -ge 10 && $n != "$__dt_err" && '
            '$f -ef /proc/$$/fd/$__dt_err ]] && eval "exec $n>&-"; done; echo closed'
        )
        r = box.run(close, timeout=10)
        assert r.output.startswith(b"closed\n") and r.shell_restarted, r
        assert "shell exited with code 125" in r.note, r.note
        # ... so the next command runs once, in the new shell, and reports to the host.
        r = box.run("echo x >> /tmp/count; exit 4", timeout=10)
        assert r.exit_code == 4 and r.shell_restarted
        assert box.run("cat /tmp/count").output == b"x\n"
        # TMOUT is the default timeout of bash's `read`, the framing's own included.
        box.run("TMOUT=1")
        time.sleep(1.5)
        r = box.run("echo ran > /tmp/ran; echo visible", timeout=10)
        assert r.output == b"visible\n" and not r.shell_restarted, r
        assert box.run("cat /tmp/ran").output == b"ran\n"
        # A shell that does not read (stopped) cannot hold the harness past the timeout, even
        # with a command bigger than the buffers on the way.
        box.run("unset TMOUT; (sleep 0.5; kill -STOP $$) &")
        time.sleep(1.0)
        began = time.monotonic()
        r = box.run("echo " + "x" * (4 << 20) + " > /dev/null", timeout=3)
        assert r.timed_out and r.shell_restarted and "never ran" in r.note, r.note
        assert time.monotonic() - began < 15
        assert box.run("echo back").output == b"back\n"
    finally:
        box.close()


def test_set_x_does_not_show_the_framing(sb: DockerSandbox) -> None:
    sb.run("set -x")
    r = sb.run("echo traced")
    sb.run("set +x")
    # Traced inside two evals (the loop's and the command's): two levels deeper.
    assert r.output == b"+++ echo traced\ntraced\n"
    assert sb.run("echo $-").output.decode().find("x") == -1


def test_output_is_capped_for_the_model_with_the_omitted_count(sb: DockerSandbox) -> None:
    r = sb.run("seq 1 100000")
    text = "".join(f"{i}\n" for i in range(1, 100_001))
    omitted = len(text) - HEAD_CHARS - TAIL_CHARS
    assert r.output.decode() == text
    assert r.observation == (
        text[:HEAD_CHARS]
        + f"\n[... {omitted} characters omitted ...]\n"
        + text[-TAIL_CHARS:]
        + "[exit code 0]"
    )


def test_hundreds_of_megabytes_keep_memory_bounded(sb: DockerSandbox) -> None:
    sb.run("true")
    before = rss_bytes()
    r = sb.run("yes | head -c 300000000; echo; echo tail-line", timeout=120)
    grown = rss_bytes() - before
    assert not r.timed_out and r.exit_code == 0
    assert r.output_bytes == 300_000_000 + len("\ntail-line\n")
    assert len(r.output) == HEAD_BYTES + TAIL_BYTES
    assert r.output.startswith(b"y\ny\n") and r.output.endswith(b"y\n\ntail-line\n")
    assert grown < 64 * 1024 * 1024, f"RSS grew by {grown} bytes"
    assert sb.run("echo alive").output == b"alive\n"


def test_random_binary_output_is_bounded_and_decoded_safely(sb: DockerSandbox) -> None:
    before = rss_bytes()
    r = sb.run("cat /dev/urandom | head -c 5M")
    grown = rss_bytes() - before
    assert r.exit_code == 0 and r.output_bytes == 5 * 1024 * 1024
    assert len(r.output) == HEAD_BYTES + TAIL_BYTES
    assert grown < 64 * 1024 * 1024
    body = r.observation.rsplit("\n[exit code 0]", 1)[0]
    assert "characters omitted" in body
    assert not any(ord(c) < 32 and c not in "\n\t" for c in body)
    assert sb.run("echo alive").output == b"alive\n"


def test_a_nul_byte_command_is_refused_not_run(sb: DockerSandbox) -> None:
    r = sb.run("echo a\0b")
    assert r.exit_code is None and r.observation.startswith("[not run:")


def test_break_and_continue_at_top_level_end_the_command_like_any_other(sb: DockerSandbox) -> None:
    # The shell's command loop is the only loop around a typed command: `break` or `continue`
    # there must neither hang the call nor lose the shell.
    sb.run("KEEP=kept")
    for command in ("break", "continue", "break 3; echo never", "continue; echo never"):
        r = sb.run(command, timeout=10)
        assert not r.timed_out and not r.shell_restarted and r.exit_code == 0, command
        assert b"never" not in r.output
    r = sb.run("(exit 6)")
    assert r.exit_code == 6
    assert sb.run("echo $? $KEEP").output == b"6 kept\n"
    r = sb.run("for i in 1 2 3; do echo $i; [ $i = 2 ] && break; done; echo done")
    assert r.output == b"1\n2\ndone\n" and not r.shell_restarted


def test_exit_code_arrives_while_the_shell_stdout_is_redirected(sb: DockerSandbox) -> None:
    # With the shell's stdout sent elsewhere the end mark cannot come on it: the exit code comes
    # on the exec's stderr, and once stdout is back the usual single mark is used again.
    r = sb.run("exec 7>&1 >/tmp/redirected.txt; echo hidden; (exit 3)", timeout=10)
    assert r.exit_code == 3 and not r.timed_out and not r.shell_restarted
    assert b"hidden" not in r.output
    r = sb.run("exec >&7 7>&-; cat /tmp/redirected.txt", timeout=10)
    assert r.exit_code == 0 and not r.timed_out
    assert sb.run("echo back").output == b"back\n"
    # (the file also holds that command's spent stdout mark: where its output stopped)
    assert sb.run("cat /tmp/redirected.txt; rm /tmp/redirected.txt").output.startswith(b"hidden\n")


def test_a_child_that_makes_the_shell_stdout_nonblocking_loses_no_output(sb: DockerSandbox) -> None:
    # Node and other runtimes set O_NONBLOCK on an inherited pipe and leave it so: the pipe is
    # still the shell's own stream (its inode), so every later command's output arrives whole.
    r = sb.run(
        "python3 -c 'import fcntl, os; "
        "fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)'",
        timeout=10,
    )
    assert r.exit_code == 0 and not r.shell_restarted
    for _ in range(3):
        r = sb.run("seq 1 2000 | tail -n 2; echo end", timeout=10)
        assert r.output == b"1999\n2000\nend\n" and not r.shell_restarted and r.exit_code == 0


# Issue 24, point 7: a command reads its own nonce from the shell's input (the descriptor bash
# reads its frames from) and prints an end mark with it, then goes on running. The host takes
# it for done and sends the next frame, which the loop, once the command ends, reads from.
FORGER = r"""read -r -N 32 -u $__dt_in n; printf '\036%s\035%s 1 /forged\0' "$n" 7; {then}"""


def test_a_forged_end_mark_is_caught_and_the_command_it_stole_never_runs(sb: DockerSandbox) -> None:
    forged = sb.run(FORGER.format(then="sleep 1"), timeout=10)
    assert forged.exit_code == 7  # what the forger said: the host cannot tell yet
    with pytest.raises(ShellForgery) as caught:
        sb.run("touch /tmp/stolen; echo stolen", timeout=10)
    assert caught.value.kind == "shell_forgery" and "never ran" in caught.value.detail
    after = sb.run("ls /tmp/stolen; echo fresh", timeout=10)  # a new shell
    assert b"No such file" in after.output and after.output.endswith(b"fresh\n"), after


def test_a_forged_mark_is_caught_when_the_shell_stdout_went_elsewhere(sb: DockerSandbox) -> None:
    # The loop's own mark then goes to the file, and on the exec's stderr: caught there.
    sb.run(FORGER.format(then="exec >/tmp/elsewhere; sleep 1"), timeout=10)
    with pytest.raises(ShellForgery):
        sb.run("echo stolen", timeout=10)
    assert sb.run("echo fresh", timeout=10).output == b"fresh\n"


def test_the_probe_catches_a_forged_mark_on_the_last_call(sb: DockerSandbox) -> None:
    assert sb.shell is not None
    sb.run(FORGER.format(then="sleep 1"), timeout=10)
    with pytest.raises(ShellForgery):
        sb.shell.probe()
    sb.shell.probe()  # the forger's shell was dropped: nothing to probe, nothing started
    assert sb.shell.pid is None
    assert sb.run("echo fresh", timeout=10).output == b"fresh\n"


def test_honest_commands_and_the_probe_are_not_taken_for_forgeries(sb: DockerSandbox) -> None:
    assert sb.shell is not None
    # A well-formed end mark with a nonce that is not a piece of the frame, and the real
    # nonce's place read by nobody: an honest command's output, kept as it is.
    mark = r"printf '\036%s\035%s /x\0' $(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n') 0"
    r = sb.run(f"{mark}; echo ok", timeout=10)
    assert r.exit_code == 0 and r.output.endswith(b"\0ok\n") and not r.shell_restarted
    sb.run("sleep 0.3 &")
    sb.run("cd /tmp; (exit 3)")
    sb.shell.probe()
    sb.shell.probe()
    # The probe ran nothing: `$?` is still the last command's, as a terminal would show.
    r = sb.run("echo $? after-probes", timeout=10)
    assert r.output == b"3 after-probes\n" and r.exit_code == 0 and not r.shell_restarted
    assert sb.shell.cwd == "/tmp"
    sb.run("cd ~")


def test_a_shell_that_does_not_answer_the_probe_is_replaced_with_a_note(sb: DockerSandbox) -> None:
    assert sb.shell is not None
    sb.run("(sleep 0.3; kill -STOP $$) >/dev/null 2>&1 &")
    time.sleep(1.0)
    began = time.monotonic()
    sb.shell.probe(timeout=2)
    assert time.monotonic() - began < 10
    r = sb.run("echo back", timeout=10)
    assert r.output == b"back\n" and r.shell_restarted, r
    assert "did not answer the harness" in r.note, r.note


def test_the_telltale_is_found_across_any_split_of_the_stream() -> None:
    nonce = b"0123456789abcdef" * 2
    sent = frame(b"touch /tmp/stolen; echo a long command", nonce, False)
    piece = sent[3:35]
    for stream in ("stdout", "stderr"):
        sep = b"\x1d" if stream == "stdout" else b" "
        data = b"late output\x1e" + piece + sep + b"0 " + (b"" if sep == b"\x1d" else b"r ")
        data += b"/home/user\0"
        for size in (1, 7, 36, len(data)):
            outcome = Outcome(nonce, sent)
            for at in range(0, len(data), size):
                getattr(outcome, stream)(data[at : at + size])
            assert outcome.forged == piece, (stream, size)
    # Its own nonce is the real mark; a nonce that is no piece of the frame is output.
    for honest in (nonce, b"f" * 32):
        outcome = Outcome(nonce, sent)
        outcome.stdout(b"x\x1e" + honest + b"\x1d0 /\0")
        assert outcome.forged is None
    assert outcome.capture.data().startswith(b"x")

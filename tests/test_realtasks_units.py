"""The parts of docs/realtasks.md that need no Docker: heredoc markers, what a task needs,
agent code in tests, and the paths a %post chowns itself."""

from __future__ import annotations

import pytest

from engine.sandbox.buildkit import to_classic
from engine.tasks.apptainer import _chowned
from engine.tasks.dockerfile import instructions
from engine.tasks.needs import find_needs
from engine.verify.agent_code import scan_python, scan_shell


@pytest.mark.parametrize(
    ("line", "delimiters"),
    [
        ("RUN cat > /etc/app.conf << 'EOF'", ["EOF"]),
        ('RUN cat <<"END" > x', ["END"]),
        ("RUN cat <<\\EOF > x", ["EOF"]),
        ("RUN cat <<- EOT > x", ["EOT"]),
        ("RUN cat <<A > a && cat << B > b", ["A", "B"]),
        ("COPY << EOF /x", ["EOF"]),
        ("RUN echo $((1 << 3))", []),  # a shift, not a heredoc
        ('RUN cat <<< "here string"', []),
        ('RUN ["sh", "-c", "cat <<EOF"]', []),  # the exec form has none
    ],
)
def test_heredoc_markers(line: str, delimiters: list[str]) -> None:
    bodies = "".join(f"body of {d}\n{d}\n" for d in delimiters) or "EOF\n"
    [first, *_] = instructions(f"FROM x\n{line}\n{bodies}")[1:]
    assert [h.delimiter for h in first.heredocs] == delimiters


def test_a_marker_without_its_closing_line_is_left_to_docker() -> None:
    text = "FROM x\nRUN cat << EOF > f\nno end here\n"
    assert to_classic(text) == (text, [])


def test_what_a_task_needs() -> None:
    assert find_needs(dockerfile=("Dockerfile", "FROM x\nRUN apt-get install -y xvfb\n")) == ()
    assert find_needs(
        dockerfile=("Dockerfile", "FROM x\nRUN apt-get install -y xfce4 x11vnc\n")
    ) == ("needs a GUI (Dockerfile line 2: installs xfce4)",)
    assert find_needs(environment={"mcp_servers": [{"name": "tools", "url": "http://t:8000"}]}) == (
        "needs service tools (an MCP server task.toml declares for the agent)",
    )
    solve = ("solve.sh", "#!/bin/bash\ncurl -s http://localhost:8000/x\npip install requests\n")
    assert find_needs(solution=solve) == ()  # the task does not ask for the network
    [why] = find_needs(solution=solve, network_allowed=True)
    assert why.startswith("needs the network (solve.sh line 3: pip install requests")


def test_agent_code_in_command_substitutions_and_sys_path_imports() -> None:
    [found] = scan_shell("test.sh", 'out="$(./greet.sh Ada)"\n', roots=("/app",))
    assert (found.kind, found.target) == ("program", "./greet.sh")
    evidence = scan_python("t.py", "import sys, os\nsys.path.append('/app')\nimport helper\n")
    assert [e.kind for e in evidence] == ["sys_path", "agent_import"]
    # Without a sys.path change the same import is a module the trusted pytest lacks.
    assert [e.kind for e in scan_python("t.py", "import helper\n")] == ["import"]


def test_paths_a_post_chowns_itself() -> None:
    post = "mkdir -p /home/user/a\nchown root:root /home/user/a/ref.txt && chmod 444 x\n"
    post += "chown -R user:user /home/user/b; chown root /etc/passwd\n"
    assert _chowned(post, "/home/user") == ["/home/user/a/ref.txt", "/home/user/b"]

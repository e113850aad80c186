"""`depthtui models list` and `depthtui models check` (one real request to a loopback server)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from depthtui.commands import models
from devtools.scripted_server import ScriptedServer, calls, slow, text

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli():
    app = typer.Typer()
    models.register(app)

    @app.callback()
    def _root() -> None:  # keep `models` a subcommand
        pass

    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def _models_file(tmp_path: Path, base_url: str, model: str, key_env: str = "") -> Path:
    path = tmp_path / "models.toml"
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    path.write_text(f'[models.local]\nbase_url = "{base_url}"\nmodel = "{model}"\n{key}')
    return path


def test_list_json_reads_the_named_file(cli, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "x")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = cli("models", "list", "--json", "--models", str(ROOT / "models.example.toml"))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    by_name = {m["name"]: m for m in doc["models"]}
    assert doc["file"].endswith("models.example.toml")
    assert by_name["oracle"]["kind"] == "oracle"
    assert by_name["qwen3-coder-or"]["key"] == "set"
    assert by_name["gpt-4.1-mini"]["key"] == "missing"
    assert by_name["qwen3-8b-local"]["key"] == "-"


def test_list_table_and_a_broken_file(cli, tmp_path):
    result = cli("models", "list", "--models", str(ROOT / "models.example.toml"))
    assert result.exit_code == 0 and "qwen3-8b-local" in result.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[models.x]\nmodel = "m"\n')
    result = cli("models", "list", "--models", str(bad))
    assert result.exit_code == 1
    assert "models.x.base_url" in flat(result.output) and str(bad) in flat(result.output)


def test_check_ok(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", "k-123")
    with ScriptedServer([calls("echo ok")], api_key="k-123") as server:
        path = _models_file(tmp_path, server.base_url, server.model, "LOCAL_KEY")
        result = cli("models", "check", "local", "--models", str(path))
    assert result.exit_code == 0, result.output
    assert "ok" in result.stdout and "issued a command" in result.stdout
    assert len(server.chat_requests) == 1
    assert server.chat_requests[0].body["tools"][0]["function"]["name"] == "bash"


def test_check_reply_without_a_command_is_reported(cli, tmp_path):
    with ScriptedServer([text("ok")]) as server:
        path = _models_file(tmp_path, server.base_url, server.model)
        result = cli("models", "check", "local", "--models", str(path), "--json")
    doc = json.loads(result.stdout)
    assert doc["ok"] and not doc["issued_command"] and "tool-call parser" in doc["detail"]


def test_check_missing_key_variable(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    path = _models_file(tmp_path, "http://127.0.0.1:9/v1", "m", "NOT_SET_KEY")
    result = cli("models", "check", "local", "--models", str(path))
    assert result.exit_code == 1
    assert "NOT_SET_KEY" in flat(result.output) and "not set" in flat(result.output)


def test_check_refused_connection(cli, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    path = _models_file(tmp_path, f"http://127.0.0.1:{port}/v1", "m")
    result = cli("models", "check", "local", "--models", str(path))
    assert result.exit_code == 1
    assert "connection refused" in flat(result.output) and str(port) in flat(result.output)


def test_check_unknown_model_id(cli, tmp_path):
    with ScriptedServer([]) as server:
        path = _models_file(tmp_path, server.base_url, "no-such-model")
        result = cli("models", "check", "local", "--models", str(path))
    assert result.exit_code == 1
    assert "does not know the model id 'no-such-model'" in flat(result.output)
    assert "404" in flat(result.output)


def test_check_bad_auth(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", "wrong")
    with ScriptedServer([], api_key="right") as server:
        path = _models_file(tmp_path, server.base_url, server.model, "LOCAL_KEY")
        result = cli("models", "check", "local", "--models", str(path))
    assert result.exit_code == 1
    assert "refused the key in $LOCAL_KEY" in flat(result.output) and "401" in flat(result.output)
    assert "wrong" not in result.output.replace("wrong-", "")


def test_check_unknown_name_and_builtin(cli, tmp_path):
    path = _models_file(tmp_path, "http://127.0.0.1:9/v1", "m")
    result = cli("models", "check", "nope", "--models", str(path))
    assert result.exit_code == 1 and "unknown model or agent 'nope'" in flat(result.output)
    result = cli("models", "check", "oracle", "--models", str(path))
    assert result.exit_code == 1 and "built-in agent" in flat(result.output)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on return: nothing listens there


def test_check_shows_what_the_model_said(cli, tmp_path):
    words = "I will run it now.\n[bold]not markup[/bold]\nline 3\nline 4\nline 5\nline 6"
    with ScriptedServer([calls("echo ok", content=words)]) as server:
        path = _models_file(tmp_path, server.base_url, server.model)
        result = cli("models", "check", "local", "--models", str(path))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "it said:" in out and "[bold]not markup[/bold]" in out and "line 5" in out
    assert "line 6" not in out  # the first lines only
    assert "$ echo ok" in out


def test_check_tells_a_slow_server_from_a_dead_one(cli, tmp_path):
    # Slow: the server accepts the connection but answers after the timeout.
    with ScriptedServer([slow(4, calls("echo ok"))]) as server:
        path = _models_file(tmp_path, server.base_url, server.model)
        result = cli("models", "check", "local", "--models", str(path), "--timeout", "1", "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 1 and not doc["ok"] and doc["state"] == "slow"
    assert "accepts connections but gave no reply within 1 s" in doc["detail"]
    assert "--timeout" in doc["detail"]
    # Dead: nothing listens on the port, on every try.
    port = _closed_port()
    path = _models_file(tmp_path, f"http://127.0.0.1:{port}/v1", "m")
    result = cli("models", "check", "local", "--models", str(path), "--tries", "2")
    assert result.exit_code == 1
    text_ = flat(result.output)
    assert f"dead: nothing listens on 127.0.0.1:{port}" in text_ and "(all 2 tries)" in text_


def test_check_tries_again_after_a_slow_reply_and_a_longer_timeout_waits(cli, tmp_path):
    with ScriptedServer([slow(4, calls("echo slow")), calls("echo ok")]) as server:
        path = _models_file(tmp_path, server.base_url, server.model)
        result = cli(
            "models", "check", "local", "--models", str(path), "--timeout", "1", "--tries", "3",
            "--json",
        )  # fmt: skip
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["ok"], result.output
    assert [t["state"] for t in doc["tries"]] == ["slow", "ok"]  # stopped at the first answer
    assert doc["commands"] == ["echo ok"] and "on try 2 of 3" in doc["detail"]
    # The default 60 s would wait; so does a --timeout longer than the model's request timeout.
    tmp_models = tmp_path / "short.toml"
    with ScriptedServer([slow(2, calls("echo late"))]) as server:
        tmp_models.write_text(
            f'[models.local]\nbase_url = "{server.base_url}"\nmodel = "{server.model}"\n'
            "request_timeout_s = 1\n"
        )
        result = cli("models", "check", "local", "--models", str(tmp_models), "--timeout", "10")
    assert result.exit_code == 0, result.output
    assert "$ echo late" in result.stdout

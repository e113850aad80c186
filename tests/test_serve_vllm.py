"""`depthtui serve`: the vLLM command line, and the whole launcher against a stand-in vllm
(tests/fake_vllm) that checks its flags and answers /health and /v1/models on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.agents import serve
from engine.agents.registry import load_registry
from engine.agents.serve import ServeError, ServeOptions

ROOT = Path(__file__).resolve().parents[1]
FAKE_VLLM = ROOT / "tests" / "fake_vllm"
DEPTHTUI = Path(sys.executable).parent / "depthtui"


@pytest.mark.parametrize(
    "model, tool, reasoning",
    [
        ("Qwen/Qwen3-8B", "hermes", "qwen3"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder", None),
        ("Qwen/Qwen3.5-35B-A3B", "qwen3_coder", "qwen3"),
        ("Qwen/Qwen2.5-7B-Instruct", "hermes", None),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json", None),
        ("mistralai/Devstral-Small-2507", "mistral", None),
        ("openai/gpt-oss-20b", "openai", "openai_gptoss"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v31", None),
        ("some-org/unknown-model", None, None),
    ],
)
def test_parsers_by_model_family(model, tool, reasoning):
    assert serve.tool_parser_for(model) == tool
    assert serve.reasoning_parser_for(model) == reasoning


def test_a_local_folder_is_recognised_by_its_config(tmp_path: Path):
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    assert serve.tool_parser_for(str(folder)) == "hermes"


def test_command_line_with_lora_adapters(tmp_path: Path):
    sql, shell = tmp_path / "sql", tmp_path / "shell"
    for folder, rank in ((sql, 16), (shell, 32)):
        folder.mkdir()
        (folder / "adapter_config.json").write_text(json.dumps({"r": rank}))
    opts = ServeOptions(
        model="Qwen/Qwen3-8B",
        port=8123,
        served_model_name="qwen3-8b",
        max_model_len=32768,
        seed=7,
        loras=(serve.parse_lora(f"sql={sql}"), serve.parse_lora(f"shell={shell}")),
    )
    cmd = serve.vllm_command(opts, ["/opt/vllm"])
    assert cmd == [
        "/opt/vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "8123",
        "--served-model-name", "qwen3-8b",
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--reasoning-parser", "qwen3",
        "--max-model-len", "32768", "--seed", "7", "--enable-prompt-tokens-details",
        "--enable-lora", "--max-lora-rank", "32", "--max-loras", "2",
        "--lora-modules", f"sql={sql}", f"shell={shell}",
    ]  # fmt: skip
    names = [e.name for e in serve.registry_entries(opts, "q8")]
    models = [e.model for e in serve.registry_entries(opts, "q8")]
    assert names == ["q8", "q8-sql", "q8-shell"] and models == ["qwen3-8b", "sql", "shell"]


def test_unknown_family_needs_a_parser_and_none_turns_tools_off():
    with pytest.raises(ServeError, match="--tool-parser"):
        serve.vllm_command(ServeOptions(model="org/mystery"), ["vllm"])
    cmd = serve.vllm_command(ServeOptions(model="org/mystery", tool_parser="none"), ["vllm"])
    assert "--enable-auto-tool-choice" not in cmd and "--tool-call-parser" not in cmd
    opts = ServeOptions(model="org/mystery", tool_parser="none")
    assert serve.registry_entries(opts, "m")[0].action_format == "fenced"


def test_bad_lora_specs(tmp_path: Path):
    with pytest.raises(ServeError, match="NAME=PATH"):
        serve.parse_lora("just-a-path")
    with pytest.raises(ServeError, match="is not a folder"):
        serve.parse_lora(f"x={tmp_path / 'missing'}")


def test_vllm_not_installed(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(ServeError, match="vllm is not installed"):
        serve.find_vllm(environ={})
    with pytest.raises(ServeError, match="--vllm-bin: cannot run"):
        serve.find_vllm(str(tmp_path / "nope"), environ={})
    with pytest.raises(ServeError, match="DEPTHTUI_VLLM: cannot run"):
        serve.find_vllm(environ={"DEPTHTUI_VLLM": "missing-vllm --flag"})
    assert serve.find_vllm(environ={"DEPTHTUI_VLLM": f"{FAKE_VLLM} --x"}) == [str(FAKE_VLLM), "--x"]


def test_gpu_detection(tmp_path: Path):
    assert not serve.gpu_present(tmp_path, which=lambda _: None)
    (tmp_path / "nvidia0").touch()
    assert serve.gpu_present(tmp_path, which=lambda _: None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state says it is gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


def _cleanup(proc: subprocess.Popen, record: Path) -> None:
    """After a failed assertion: stop depthtui as a user would, and never leave a stand-in."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if record.exists():
        try:
            os.killpg(json.loads(record.read_text())["pid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError, KeyError):
            pass


def test_serve_with_the_stand_in_registers_and_stops_the_process_group(tmp_path: Path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 8}))
    models_file = tmp_path / "models.toml"
    models_file.write_text('# mine\n[models.other]\nbase_url = "http://x"\nmodel = "o"\n')
    record = tmp_path / "fake.json"
    port = _free_port()
    env = {
        **os.environ,
        "DEPTHTUI_VLLM": str(FAKE_VLLM),
        "FAKE_VLLM_RECORD": str(record),
        "FAKE_VLLM_LOAD_S": "1.5",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.Popen(
        [
            str(DEPTHTUI), "serve", "Qwen/Qwen3-8B", "--port", str(port),
            "--served-model-name", "qwen3-8b", "--max-model-len", "16384", "--seed", "1",
            "--lora", f"shell={adapter}", "--register", "q8", "--models", str(models_file),
            "--skip-gpu-check",
        ],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait(
            lambda: "q8-shell" in models_file.read_text() or proc.poll() is not None,
            90,
            "registration",
        )
        assert proc.poll() is None, proc.stdout.read()
        got = json.loads(record.read_text())
        argv = got["argv"]
        assert argv[:2] == ["serve", "Qwen/Qwen3-8B"]
        for flag, value in [
            ("--tool-call-parser", "hermes"),
            ("--reasoning-parser", "qwen3"),
            ("--max-model-len", "16384"),
            ("--seed", "1"),
            ("--max-lora-rank", "8"),
            ("--lora-modules", f"shell={adapter}"),
        ]:
            assert argv[argv.index(flag) + 1] == value
        assert "--enable-auto-tool-choice" in argv and "--enable-lora" in argv

        registry = load_registry(models_file)
        base, lora = registry.get("q8"), registry.get("q8-shell")
        assert base.base_url == f"http://127.0.0.1:{port}/v1" and base.model == "qwen3-8b"
        assert lora.model == "shell" and base.max_total_tokens == 16384
        assert registry.get("other").model == "o" and "# mine" in models_file.read_text()

        # The registered endpoint answers a real check through the CLI.
        check = subprocess.run(
            [str(DEPTHTUI), "models", "check", "q8-shell", "--models", str(models_file)],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        assert "issued a command" in " ".join(check.stdout.split())

        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert "stopping vLLM" in out
    finally:
        _cleanup(proc, record)
    # Both the stand-in and the child it started are gone: the whole group was stopped.
    _wait(lambda: not _alive(got["pid"]) and not _alive(got["child"]), 30, "the group to stop")


def test_serve_reports_a_server_that_dies_while_loading(tmp_path: Path):
    env = {**os.environ, "DEPTHTUI_VLLM": str(FAKE_VLLM), "XDG_CACHE_HOME": str(tmp_path)}
    result = subprocess.run(
        [
            str(DEPTHTUI), "serve", "Qwen/Qwen3-8B", "--port", str(_free_port()),
            "--skip-gpu-check", "--vllm-arg", "--no-such-flag",
        ],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    text = " ".join(result.stderr.split())
    assert "vLLM exited with code 2 before it was ready" in text
    assert "unrecognized arguments: --no-such-flag" in text


def test_a_dead_engine_is_shown_from_its_first_error_line(tmp_path: Path):
    env = {
        **os.environ,
        "DEPTHTUI_VLLM": str(FAKE_VLLM),
        "XDG_CACHE_HOME": str(tmp_path),
        "FAKE_VLLM_CRASH": "not enough KV cache memory for max_model_len 32768",
        "COLUMNS": "300",
    }
    result = subprocess.run(
        [str(DEPTHTUI), "serve", "Qwen/Qwen3-8B", "--port", str(_free_port()), "--skip-gpu-check"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    text = " ".join(result.stderr.split())
    assert "vLLM exited with code 1 before it was ready" in text
    # The excerpt starts at the first error line, so the root cause is in it...
    assert "EngineCore failed to start" in text
    assert "RuntimeError: not enough KV cache memory for max_model_len 32768" in text
    assert "loading step" not in text  # ...and nothing before it
    assert "See root cause above" in text  # the end stays too
    # The command was printed on one line, ready to copy.
    [line] = [ln for ln in result.stdout.splitlines() if ln.startswith("starting: ")]
    assert line.endswith("--reasoning-parser qwen3 --enable-prompt-tokens-details")
    assert "serve Qwen/Qwen3-8B" in line


def test_log_excerpt_without_errors_is_the_tail():
    text = "\n".join(f"line {i}" for i in range(100))
    assert serve.log_excerpt(text).splitlines() == [f"line {i}" for i in range(70, 100)]
    long = "\n".join(["INFO ok", "ERROR boom", *(f"x{i}" for i in range(200))])
    lines = serve.log_excerpt(long).splitlines()
    assert lines[0] == "ERROR boom" and lines[-1] == "x199"
    assert lines[80] == "[... 91 line(s) omitted ...]" and len(lines) == 111
    # A server killed by a signal (the CPU build on a CPU without AVX-512 logs nothing).
    assert serve._signal_note(-4).startswith(" (killed by SIGILL: an instruction this CPU lacks")
    assert serve._signal_note(2) == ""


def test_a_missing_local_model_folder_is_named(tmp_path: Path):
    missing = tmp_path / "models" / "tiny-qwen3"
    with pytest.raises(ServeError, match=re.escape(f"model folder {missing} does not exist")):
        serve.vllm_command(ServeOptions(model=str(missing)), ["vllm"])
    missing.mkdir(parents=True)
    with pytest.raises(ServeError, match=re.escape("has no config.json")):
        serve.vllm_command(ServeOptions(model=str(missing)), ["vllm"])
    # A Hugging Face id is not a path, even with its slash.
    assert serve.vllm_command(ServeOptions(model="Qwen/Qwen3-8B"), ["vllm"])[2] == "Qwen/Qwen3-8B"


def test_serve_without_vllm_says_how_to_install_it(tmp_path: Path):
    env = {**os.environ, "DEPTHTUI_VLLM": str(tmp_path / "not-here")}
    result = subprocess.run(
        [str(DEPTHTUI), "serve", "Qwen/Qwen3-8B", "--skip-gpu-check"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1 and "cannot run" in result.stderr

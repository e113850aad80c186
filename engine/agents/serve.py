"""Starting a vLLM OpenAI-compatible server for a model (docs/models.md), and registering it.

The command line is built from data (tool-call parser and reasoning parser by model family, LoRA
adapters served beside the base model under their own names), the server runs in its own process
group so stopping it stops its engine processes too, and readiness is GET /health (connection
refused while the weights load, 200 when ready) then GET /v1/models.

The vllm executable is `--vllm-bin`, else `$DEPTHTUI_VLLM` (a command line, split like a shell
would), else `vllm` beside this Python or on PATH, so tests can run a stand-in.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.agents.registry import ModelConfig, Sampling

ENV_VAR = "DEPTHTUI_VLLM"
# The sampling `serve --register` writes unless told otherwise (docs/serve.md): a temperature
# above 0 so independent attempts are different samples (each sends its own seed, derived from
# the base seed), and a reply cap so a rambling model cannot generate to the context limit.
DEFAULT_TEMPERATURE = 0.7
DEFAULT_TOP_P = 0.95
DEFAULT_MAX_TOKENS = 2048
DEFAULT_SAMPLING_SEED = 0
DEFAULT_LORA_RANK = 64
# A log line where vLLM's trouble starts: its ERROR records and a Python traceback. The excerpt
# of a dead server starts at the first one (the root cause comes long before the last line,
# "Engine core initialization failed. See root cause above").
ERROR_LINE = re.compile(r"^(?:\(\w+ pid=\d+\)\s*)?(?:ERROR|CRITICAL)\b|Traceback \(most recent")
EXCERPT_LINES = 80
TAIL_LINES = 30

# (pattern on the lower-cased model name, vLLM --tool-call-parser). First match wins, so the
# more specific names come first.
TOOL_PARSERS: tuple[tuple[str, str], ...] = (
    (r"qwen3[-_.]?coder", "qwen3_coder"),
    (r"qwen3[._]?[56]", "qwen3_coder"),
    (r"qwen3|qwq|qwen2\.5", "hermes"),
    (r"llama[-_]?4", "llama4_pythonic"),
    (r"llama[-_]?3", "llama3_json"),
    (r"mistral|mixtral|devstral|magistral|codestral", "mistral"),
    (r"deepseek[-_]?v3[._]?1", "deepseek_v31"),
    (r"deepseek[-_]?v3", "deepseek_v3"),
    (r"glm[-_]?4[._]?[56]", "glm45"),
    (r"kimi[-_]?k2", "kimi_k2"),
    (r"gpt[-_]?oss", "openai"),
    (r"minimax[-_]?m2", "minimax_m2"),
    (r"granite", "granite"),
    (r"hermes", "hermes"),
)
REASONING_PARSERS: tuple[tuple[str, str | None], ...] = (
    (r"qwen3[-_.]?coder", None),  # no thinking mode
    (r"qwen3|qwen3[._]?[56]", "qwen3"),
    (r"qwq|deepseek[-_]?r1", "deepseek_r1"),
    (r"gpt[-_]?oss", "openai_gptoss"),
    (r"glm[-_]?4[._]?[56]", "glm45"),
)


class ServeError(RuntimeError):
    """The server cannot be started or did not become ready; the message says what to do."""


@dataclass(frozen=True)
class ServeOptions:
    model: str  # a Hugging Face id or a local folder
    port: int = 8000
    host: str = "127.0.0.1"
    served_model_name: str | None = None
    tool_parser: str | None = None  # None = by model family; "none" = no tool calling
    reasoning_parser: str | None = None  # None = by model family; "none" = off
    max_model_len: int | None = None
    seed: int | None = None
    loras: tuple[tuple[str, str], ...] = ()  # (served name, adapter folder)
    max_lora_rank: int | None = None  # None = the largest `r` in the adapters' configs
    extra_args: tuple[str, ...] = ()
    # The registered entry's sampling block (None = the documented default above).
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    chat_template: str | None = None  # vLLM's --chat-template (None = the model's own)
    dtype: str | None = None  # vLLM's --dtype
    enforce_eager: bool = False  # skip torch.compile and CUDA graphs (docs/serve.md: CPU)
    env: tuple[tuple[str, str], ...] = ()  # set for vLLM (the CPU build's settings)

    def sampling(self) -> Sampling:
        """The sampling the registered entries send: the flags, else the defaults; the base
        seed is vLLM's --seed when given."""
        max_tokens = self.max_tokens or DEFAULT_MAX_TOKENS
        if self.max_tokens is None and self.max_model_len is not None:
            max_tokens = min(max_tokens, max(self.max_model_len // 2, 1))
        return Sampling(
            temperature=DEFAULT_TEMPERATURE if self.temperature is None else self.temperature,
            top_p=DEFAULT_TOP_P if self.top_p is None else self.top_p,
            seed=DEFAULT_SAMPLING_SEED if self.seed is None else self.seed,
            max_tokens=max_tokens,
        )

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.model

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}/v1"


def family_text(model: str) -> str:
    """What the family is guessed from: the model's name, plus config.json's model_type for a
    local folder (a folder called `final` says nothing)."""
    text = model.lower()
    config = Path(model).expanduser() / "config.json"
    if config.is_file():
        try:
            model_type = json.loads(config.read_text()).get("model_type", "")
            text += " " + str(model_type).lower()
        except (OSError, ValueError, AttributeError):
            pass
    return text


def tool_parser_for(model: str) -> str | None:
    text = family_text(model)
    return next((parser for pat, parser in TOOL_PARSERS if re.search(pat, text)), None)


def reasoning_parser_for(model: str) -> str | None:
    text = family_text(model)
    return next((parser for pat, parser in REASONING_PARSERS if re.search(pat, text)), None)


def lora_rank(loras: tuple[tuple[str, str], ...]) -> int:
    """The largest rank `r` among the adapters' adapter_config.json (vLLM must be started with at
    least that); DEFAULT_LORA_RANK when none says."""
    ranks = []
    for _, path in loras:
        try:
            r = json.loads((Path(path) / "adapter_config.json").read_text()).get("r")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(r, int) and r > 0:
            ranks.append(r)
    return max(ranks) if ranks else DEFAULT_LORA_RANK


def looks_local(model: str) -> bool:
    """Whether MODEL names a folder on this machine rather than a Hugging Face id (`org/name`):
    an absolute, home or dot-relative path, or one that exists."""
    return model.startswith(("/", "~", "./", "../")) or Path(model).expanduser().exists()


def check_local_model(model: str) -> None:
    """A local model folder must exist and hold config.json; raises ServeError naming it."""
    if not looks_local(model):
        return
    folder = Path(model).expanduser()
    if not folder.exists():
        raise ServeError(f"model folder {folder} does not exist")
    if not folder.is_dir():
        raise ServeError(f"model {folder} is not a folder (expected a model folder)")
    if not (folder / "config.json").is_file():
        raise ServeError(
            f"model folder {folder} has no config.json: not a Hugging Face model folder"
        )


def vllm_command(opts: ServeOptions, vllm_bin: list[str]) -> list[str]:
    """The vLLM command line for `opts` (raises ServeError when a local model folder is
    missing or the tool parser is unknown)."""
    check_local_model(opts.model)
    cmd = [*vllm_bin, "serve", opts.model, "--host", opts.host, "--port", str(opts.port)]
    cmd += ["--served-model-name", opts.served_name]
    parser = opts.tool_parser if opts.tool_parser is not None else tool_parser_for(opts.model)
    if parser is None:
        raise ServeError(
            f"cannot tell which tool-call parser '{opts.model}' needs; pass --tool-parser NAME "
            "(vLLM's --tool-call-parser, e.g. hermes, qwen3_coder, llama3_json, mistral), or "
            "--tool-parser none to serve it for a text action format"
        )
    if parser != "none":
        cmd += ["--enable-auto-tool-choice", "--tool-call-parser", parser]
    reasoning = (
        opts.reasoning_parser
        if opts.reasoning_parser is not None
        else reasoning_parser_for(opts.model)
    )
    if reasoning and reasoning != "none":
        cmd += ["--reasoning-parser", reasoning]
    if opts.chat_template is not None:
        cmd += ["--chat-template", opts.chat_template]
    if opts.dtype is not None:
        cmd += ["--dtype", opts.dtype]
    if opts.enforce_eager:
        cmd += ["--enforce-eager"]
    if opts.max_model_len is not None:
        cmd += ["--max-model-len", str(opts.max_model_len)]
    if opts.seed is not None:
        cmd += ["--seed", str(opts.seed)]
    # Without it vLLM's usage has no prompt_tokens_details, so prefix-cache hits (cached
    # tokens) are never counted.
    cmd += ["--enable-prompt-tokens-details"]
    if opts.loras:
        rank = opts.max_lora_rank or lora_rank(opts.loras)
        cmd += ["--enable-lora", "--max-lora-rank", str(rank), "--max-loras", str(len(opts.loras))]
        cmd += ["--lora-modules", *[f"{name}={path}" for name, path in opts.loras]]
    return cmd + list(opts.extra_args)


def parse_lora(spec: str) -> tuple[str, str]:
    """`name=path` from the command line, checked."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise ServeError(f"--lora {spec!r}: expected NAME=PATH (the adapter's folder)")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", name):
        raise ServeError(f"--lora {spec!r}: the name may hold letters, digits, '.', '_' and '-'")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ServeError(f"--lora {spec!r}: {folder} is not a folder")
    return name, str(folder.resolve())


def find_vllm(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The vllm command as argv. Raises ServeError saying how to install it."""
    env = os.environ if environ is None else environ
    spec = explicit or env.get(ENV_VAR)
    if spec:
        argv = shlex.split(spec)
        exe = shutil.which(argv[0]) if argv else None
        if not exe:
            source = "--vllm-bin" if explicit else f"${ENV_VAR}"
            raise ServeError(f"{source}: cannot run {spec!r}: no such executable")
        return [exe, *argv[1:]]
    beside = Path(sys.executable).parent / "vllm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("vllm")
    if found:
        return [found]
    raise ServeError(
        "vllm is not installed: on a machine with a GPU run `pip install 'depthtui[vllm]'` "
        f"(or point --vllm-bin / ${ENV_VAR} at a vllm executable)"
    )


def gpu_present(
    dev: Path = Path("/dev"), which: Callable[[str], str | None] = shutil.which
) -> bool:
    """An NVIDIA (or ROCm) GPU this process can use."""
    if any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists():
        return True
    smi = which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            return out.returncode == 0 and "GPU" in out.stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
    return False


def registry_entries(opts: ServeOptions, name: str) -> list[ModelConfig]:
    """The registry entries for a started server: the base model as `name`, and each LoRA adapter
    as `name-<adapter>` (requests then name the adapter as the model)."""
    fmt = "fenced" if opts.tool_parser == "none" else "tools"
    desc = f"vLLM on {opts.base_url} serving {opts.model}"
    base = ModelConfig(
        name=name,
        base_url=opts.base_url,
        model=opts.served_name,
        action_format=fmt,
        description=desc,
        max_total_tokens=opts.max_model_len,
        sampling=opts.sampling(),
    )
    out = [base]
    for lora, path in opts.loras:
        out.append(
            ModelConfig(
                name=f"{name}-{lora}",
                base_url=opts.base_url,
                model=lora,
                action_format=fmt,
                description=f"{desc} with the LoRA adapter {path}",
                max_total_tokens=opts.max_model_len,
                sampling=opts.sampling(),
            )
        )
    return out


class VllmServer:
    """One vLLM server process (and its process group)."""

    def __init__(self, argv: list[str], opts: ServeOptions, log_path: Path) -> None:
        self.argv = argv
        self.opts = opts
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                env={**os.environ, **dict(self.opts.env)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() reaches every child
            )
        except OSError as exc:
            raise ServeError(f"cannot start {self.argv[0]}: {exc}") from exc
        finally:
            log.close()

    def wait_ready(
        self,
        timeout_s: float = 1800.0,
        progress: Callable[[float, str], None] | None = None,
        poll_s: float = 1.0,
    ) -> list[str]:
        """Wait for /health then /v1/models; returns the served model ids."""
        assert self.proc is not None
        root = self.opts.base_url.removesuffix("/v1")
        started = time.monotonic()
        while True:
            elapsed = time.monotonic() - started
            code = self.proc.poll()
            if code is not None:
                raise ServeError(
                    f"vLLM exited with code {code}{_signal_note(code)} before it was ready; "
                    f"from its log ({self.log_path}):\n{self.log_excerpt()}"
                )
            state = _health(root + "/health")
            if state == "ready":
                break
            if elapsed > timeout_s:
                raise ServeError(
                    f"vLLM was not ready after {timeout_s:.0f} s ({state}); see {self.log_path}"
                )
            if progress is not None:
                progress(elapsed, state)
            time.sleep(poll_s)
        ids = _model_ids(root + "/v1/models")
        wanted = [self.opts.served_name, *[name for name, _ in self.opts.loras]]
        missing = [w for w in wanted if w not in ids]
        if missing:
            raise ServeError(f"vLLM is up but does not list {missing} in /v1/models (got {ids})")
        return ids

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the whole group, then SIGKILL whatever is left after `grace_s`."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        # The leader may be gone while engine processes of its group live on.
        _signal_group(pgid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def last_line(self, limit: int = 100) -> str:
        """The log's last non-empty line (shown while waiting), at most `limit` characters."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(f.seek(0, 2) - 4096, 0))
                lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        last = lines[-1].strip() if lines else ""
        return last if len(last) <= limit else last[: limit - 3] + "..."

    def log_excerpt(self) -> str:
        """What to show of a dead server's log (log_excerpt below)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return log_excerpt(text)


def _signal_note(code: int) -> str:
    """What a negative exit code means: the signal that killed the process."""
    if code >= 0:
        return ""
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f" (killed by signal {-code})"
    why = {
        "SIGILL": ": an instruction this CPU lacks, e.g. a build for AVX-512 (docs/serve.md)",
        "SIGKILL": ": often the out-of-memory killer",
    }.get(name, "")
    return f" (killed by {name}{why})"


def log_excerpt(text: str, lines: int = EXCERPT_LINES, tail: int = TAIL_LINES) -> str:
    """From the first error line on (up to `lines` of it, then the last `tail` lines after a
    marker), or the last `tail` lines when no line looks like an error."""
    all_lines = text.splitlines()
    first = next((i for i, line in enumerate(all_lines) if ERROR_LINE.search(line)), None)
    if first is None:
        return "\n".join(all_lines[-tail:])
    rest = all_lines[first:]
    if len(rest) <= lines + tail:
        return "\n".join(rest)
    skipped = len(rest) - lines - tail
    return "\n".join([*rest[:lines], f"[... {skipped} line(s) omitted ...]", *rest[-tail:]])


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _health(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return "ready" if resp.status == 200 else f"health answered {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"health answered {exc.code}"
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return "loading (no answer yet)"


def _model_ids(url: str) -> list[str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            doc = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ServeError(f"GET {url} failed: {exc}") from exc
    data = doc.get("data") if isinstance(doc, dict) else None
    return [m.get("id") for m in data or [] if isinstance(m, dict)]

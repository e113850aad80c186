"""`depthtui serve MODEL_OR_PATH`: start a vLLM server for a model, register it, keep it running
until Ctrl-C, then stop its whole process group."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from depthtui.commands.common import console, err_console, fail


def serve(
    model: Annotated[
        str,
        typer.Argument(
            help="A Hugging Face model id, a local model folder, or a GGUF file (or a folder "
            "holding one), dequantized once into ~/.cache/depthtui/gguf."
        ),
    ],
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind (0.0.0.0 for other machines).")] = (
        "127.0.0.1"
    ),
    served_model_name: Annotated[
        str | None,
        typer.Option(help="The model id clients send (default: MODEL_OR_PATH)."),
    ] = None,
    tool_parser: Annotated[
        str | None,
        typer.Option(
            help="vLLM's --tool-call-parser (default: by model family, e.g. hermes for Qwen3, "
            "qwen3_coder for Qwen3.5/Qwen3-Coder); 'none' serves without tool calling."
        ),
    ] = None,
    reasoning_parser: Annotated[
        str | None,
        typer.Option(help="vLLM's --reasoning-parser (default: by family); 'none' = off."),
    ] = None,
    max_model_len: Annotated[int | None, typer.Option(help="Context length in tokens.")] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="vLLM's --seed, and the registered entry's base seed (default 0)."),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(help="The registered entry's temperature (default 0.7).", min=0),
    ] = None,
    top_p: Annotated[
        float | None, typer.Option(help="The registered entry's top_p (default 0.95).")
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            help="The registered entry's max_tokens per reply (default 2048, at most half of "
            "--max-model-len).",
            min=1,
        ),
    ] = None,
    chat_template: Annotated[
        str | None,
        typer.Option(
            help="vLLM's --chat-template (a Jinja file). Default: the model's own, or "
            "prompts/templates/hermes_tools.jinja (with a warning) when a local model's "
            "template ignores tools."
        ),
    ] = None,
    cpu: Annotated[
        bool,
        typer.Option(
            "--cpu",
            help="For vLLM's CPU build: sets VLLM_TARGET_DEVICE=cpu, the KV cache size, OpenMP "
            "threads bound to every core this process may use, --dtype bfloat16 and "
            "--enforce-eager (torch.compile's warm-up took most of a 10-minute start-up); "
            "implies --skip-gpu-check.",
        ),
    ] = False,
    kv_cache_gib: Annotated[
        int, typer.Option(help="With --cpu: GiB of KV cache (VLLM_CPU_KVCACHE_SPACE).", min=1)
    ] = 1,
    compile_: Annotated[
        bool,
        typer.Option(
            "--compile", help="With --cpu: let vLLM compile the model (no --enforce-eager)."
        ),
    ] = False,
    lora: Annotated[
        list[str] | None,
        typer.Option(
            help="A LoRA adapter served beside the base model, as NAME=PATH (repeatable); "
            "requests then use model=NAME."
        ),
    ] = None,
    max_lora_rank: Annotated[
        int | None, typer.Option(help="Default: the largest r in the adapters' configs.")
    ] = None,
    register_as: Annotated[
        str | None,
        typer.Option(
            "--register",
            help="Write (or update) the entry NAME, and NAME-<adapter> per LoRA, in your models "
            "file. Without it the entries are printed.",
        ),
    ] = None,
    models: Annotated[
        Path | None,
        typer.Option("--models", help="The models file to register in (default as elsewhere)."),
    ] = None,
    vllm_bin: Annotated[
        str | None,
        typer.Option(help="The vllm executable (default: $DEPTHTUI_VLLM, else vllm on PATH)."),
    ] = None,
    vllm_arg: Annotated[
        list[str] | None,
        typer.Option(help="One more argument passed to vllm as is (repeatable)."),
    ] = None,
    skip_gpu_check: Annotated[
        bool, typer.Option(help="Start even when no GPU is found (CPU builds, stand-ins).")
    ] = False,
    ready_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the server to become ready.")
    ] = 1800.0,
    log: Annotated[
        Path | None,
        typer.Option(help="vLLM's log file (default: serve-PORT.log in your cache directory)."),
    ] = None,
) -> None:
    """Start vLLM's OpenAI-compatible server for a model and register the endpoint."""
    from platformdirs import user_cache_dir

    from engine.agents import serve as srv
    from engine.agents import serve_model as prep
    from engine.agents.registry import RegistryError, resolve_models_path
    from engine.agents.registry_write import entry_toml, upsert_entry

    try:
        vllm = srv.find_vllm(vllm_bin)
        gguf = prep.gguf_file(model)
        if gguf is not None:
            # The Python beside vllm has transformers and torch; depthtui's own need not.
            python = str(Path(vllm[0]).with_name("python"))
            model = str(
                prep.dequantize(
                    gguf,
                    Path(user_cache_dir("depthtui")),
                    python,
                    lambda line: console.print(f"gguf: {line}", highlight=False, markup=False),
                )
            )
            served_model_name = served_model_name or gguf.stem
        template = prep.choose_template(model, chat_template)
        if template.warning:
            err_console.print(f"[yellow]warning:[/] {escape(template.warning)}", soft_wrap=True)
        if template.hermes and tool_parser is None:
            tool_parser = "hermes"  # the shipped template writes Hermes <tool_call> markup
        cpu_opts: dict = {}
        if cpu:
            cores = prep.usable_cores()
            cpu_opts = {
                "env": tuple(prep.cpu_env(cores, kv_cache_gib).items()),
                "dtype": "bfloat16",
                "enforce_eager": not compile_,
            }
            skip_gpu_check = True
        loras = tuple(srv.parse_lora(spec) for spec in lora or [])
        opts = srv.ServeOptions(
            model=model,
            port=port,
            host=host,
            served_model_name=served_model_name,
            tool_parser=tool_parser,
            reasoning_parser=reasoning_parser,
            max_model_len=max_model_len,
            seed=seed,
            loras=loras,
            max_lora_rank=max_lora_rank,
            extra_args=tuple(vllm_arg or []),
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            chat_template=template.path,
            **cpu_opts,
        )
        argv = srv.vllm_command(opts, vllm)
    except (srv.ServeError, prep.PrepareError) as exc:
        fail(str(exc))
    if not skip_gpu_check and not srv.gpu_present():
        fail(
            "no GPU found (no /dev/nvidia*, no working nvidia-smi): vLLM needs one. "
            "Pass --skip-gpu-check for a CPU build of vLLM."
        )
    entries = srv.registry_entries(opts, register_as or _entry_name(opts.served_name))
    log_path = log or Path(user_cache_dir("depthtui")) / f"serve-{port}.log"
    server = srv.VllmServer(argv, opts, log_path)

    # Ctrl-C and a plain `kill` both end in the finally below, which stops the process group.
    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # One line, quoted as a shell would need it, so it can be copied and run by hand.
    console.print(f"starting: {shlex.join(argv)}", highlight=False, markup=False, soft_wrap=True)
    for key, value in opts.env:
        console.print(f"env: {key}={value}", highlight=False, markup=False)
    console.print(f"log: {log_path}", highlight=False)
    server.start()
    try:
        with console.status("waiting for vLLM") as status:

            def progress(elapsed: float, state: str) -> None:
                # The log's last line says what vLLM is doing (loading, compiling, warming up).
                status.update(
                    f"waiting for vLLM: {state}, {elapsed:.0f} s; {escape(server.last_line())}"
                )

            ids = server.wait_ready(ready_timeout, progress)
        console.print(f"[green]ready[/]: {opts.base_url} serving {', '.join(ids)}")
        if register_as:
            path, _ = resolve_models_path(models)
            try:
                for entry in entries:
                    upsert_entry(path, entry)
            except (RegistryError, OSError) as exc:
                fail(f"cannot register in {path}: {exc}")
            names = ", ".join(e.name for e in entries)
            console.print(f"registered {names} in {path}", highlight=False)
        else:
            console.print("models.toml entries (add them with --register NAME):")
            console.print("\n".join(entry_toml(e) for e in entries), highlight=False, markup=False)
        console.print("serving; press Ctrl-C to stop")
        code = server.proc.wait() if server.proc else 0
        fail(f"vLLM exited with code {code}; from its log:\n{server.log_excerpt()}")
    except srv.ServeError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err_console.print("stopping vLLM")
    finally:
        server.stop()


def _entry_name(served: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", served.split("/")[-1]).strip("-.") or "vllm"


def register(app: typer.Typer) -> None:
    app.command(name="serve")(serve)

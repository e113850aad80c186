"""The model registry: which agents exist and how to reach each model (models.toml).

The file is TOML with one table per model under `models` (see models.example.toml at the repo root
for every field, documented). It is read from `--models PATH`, else `$DEPTHTUI_MODELS`, else
`models.toml` in the user's config directory. The built-in agents `oracle`, `nop` and `replay` are
always present and need no entry.

Keys never live in the file: `api_key_env` names the environment variable that holds one, and the
key is read only when a client is built.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

ENV_VAR = "DEPTHTUI_MODELS"
ActionFormat = Literal["tools", "fenced", "tags"]
# "external": a policy outside depthtui drives the episode (engine/rl); never in models.toml.
AgentKind = Literal["chat", "oracle", "nop", "replay", "external"]
ACTION_FORMATS: tuple[str, ...] = ("tools", "fenced", "tags")
BUILTIN_AGENTS: tuple[str, ...] = ("oracle", "nop", "replay")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Local servers (vLLM) accept any key; the openai client insists on a non-empty one.
PLACEHOLDER_KEY = "EMPTY"


class RegistryError(ValueError):
    """A models.toml that cannot be used, or a name that is not in it. The message names the file,
    the field and what was expected."""


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters sent with every request; None = leave it to the server."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    # Per reply; the loop lowers it further when an episode's token budget is nearly spent.
    max_tokens: int | None = None


@dataclass(frozen=True)
class ProviderPin:
    """OpenRouter's provider routing: try these providers in order, never fall back to others."""

    order: tuple[str, ...]
    allow_fallbacks: bool = False
    require_parameters: bool | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"order": list(self.order), "allow_fallbacks": self.allow_fallbacks}
        if self.require_parameters is not None:
            out["require_parameters"] = self.require_parameters
        return out


@dataclass(frozen=True)
class Price:
    """USD per million tokens, used when the endpoint reports no `usage.cost`."""

    prompt_usd_per_mtok: float
    completion_usd_per_mtok: float
    # Cached prompt tokens are often cheaper; None = billed as ordinary prompt tokens.
    cached_usd_per_mtok: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        cached = min(cached_tokens, prompt_tokens) if self.cached_usd_per_mtok is not None else 0
        return (
            (prompt_tokens - cached) * self.prompt_usd_per_mtok
            + cached * (self.cached_usd_per_mtok or 0.0)
            + completion_tokens * self.completion_usd_per_mtok
        ) / 1_000_000


@dataclass(frozen=True)
class ModelConfig:
    """One agent: a chat model behind an OpenAI-compatible endpoint, or a built-in agent."""

    name: str
    kind: AgentKind = "chat"
    base_url: str = ""
    # The NAME of the environment variable holding the key; "" = the endpoint needs none.
    api_key_env: str = ""
    model: str = ""
    action_format: ActionFormat = "tools"
    sampling: Sampling = field(default_factory=Sampling)
    provider: ProviderPin | None = None
    price: Price | None = None
    # Episode totals (see EpisodeLimits); the tighter of these and the run's limits applies.
    max_total_tokens: int | None = None
    max_completion_tokens: int | None = None
    request_timeout_s: float = 600.0
    # Provider errors (429, 5xx, timeouts, refused connections): tries per request, and the
    # exponential backoff between them (jittered), before the episode ends as an
    # infrastructure error.
    retry_attempts: int = 6
    retry_base_delay_s: float = 2.0
    retry_max_delay_s: float = 60.0
    # Extra request-body fields sent as is (e.g. vLLM's chat_template_kwargs).
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    source: Path | None = None

    @property
    def builtin(self) -> bool:
        return self.kind != "chat"

    def api_key(self, environ: Mapping[str, str] | None = None) -> str:
        """The key from the named environment variable (a placeholder when none is named).
        Raises RegistryError when the variable is named but unset, so the user learns which."""
        if not self.api_key_env:
            return PLACEHOLDER_KEY
        env = os.environ if environ is None else environ
        value = env.get(self.api_key_env, "")
        if not value:
            raise RegistryError(
                f"model '{self.name}': the environment variable {self.api_key_env} "
                f"(api_key_env) is not set; export it with the endpoint's API key"
            )
        return value


BUILTIN_DESCRIPTIONS = {
    "oracle": "Runs each segment's reference solution (/solution/solve.sh) as one call.",
    "nop": "Does nothing: finishes at once.",
    "replay": "Re-issues a stored episode's commands turn by turn.",
}


@dataclass(frozen=True)
class Registry:
    models: Mapping[str, ModelConfig]
    # The file read; None when no file exists (only the built-in agents are known then).
    path: Path | None = None

    def names(self) -> list[str]:
        return list(self.models)

    def get(self, name: str) -> ModelConfig:
        try:
            return self.models[name]
        except KeyError:
            where = f" in {self.path}" if self.path else " (no models file found)"
            raise RegistryError(
                f"unknown model or agent '{name}'{where}; known: {', '.join(self.models)}"
            ) from None


def default_models_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir("depthtui")) / "models.toml"


def resolve_models_path(path: Path | str | None = None) -> tuple[Path, bool]:
    """(the models file to use, whether the user named it). A named file must exist; the default
    one may be missing."""
    if path is not None:
        return Path(path).expanduser(), True
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser(), True
    return default_models_path(), False


def builtin_models() -> dict[str, ModelConfig]:
    return {
        name: ModelConfig(name=name, kind=name, description=BUILTIN_DESCRIPTIONS[name])  # type: ignore[arg-type]
        for name in BUILTIN_AGENTS
    }


def load_registry(path: Path | str | None = None) -> Registry:
    """Read the models file (see `resolve_models_path`) and add the built-in agents."""
    file, named = resolve_models_path(path)
    models = builtin_models()
    if not file.exists():
        if named:
            raise RegistryError(f"{file}: models file not found")
        return Registry(models=models, path=None)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{file}: cannot read: {exc}") from exc
    models.update(parse_models(text, file))
    return Registry(models=models, path=file)


def parse_models(text: str, file: Path | str = "<models.toml>") -> dict[str, ModelConfig]:
    """Parse and validate models.toml text; every error names the file, the field and what was
    expected."""
    file = Path(file)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{file}: not valid TOML: {exc}") from exc
    unknown = set(doc) - {"models"}
    if unknown:
        raise RegistryError(
            f"{file}: unknown top-level key(s) {sorted(unknown)}; "
            "expected only [models.NAME] tables"
        )
    tables = doc.get("models", {})
    if not isinstance(tables, dict):
        raise RegistryError(f"{file}: 'models' must be a table of [models.NAME] tables")
    out: dict[str, ModelConfig] = {}
    for name, table in tables.items():
        out[name] = _parse_model(name, table, _Where(file, f"models.{name}"))
    return out


# --- parsing helpers -------------------------------------------------------------------------

MODEL_KEYS = {
    "base_url",
    "api_key_env",
    "model",
    "action_format",
    "sampling",
    "provider",
    "price",
    "max_total_tokens",
    "max_completion_tokens",
    "request_timeout_s",
    "retry_attempts",
    "retry_base_delay_s",
    "retry_max_delay_s",
    "extra_body",
    "description",
}
SAMPLING_KEYS = {"temperature", "top_p", "top_k", "seed", "max_tokens"}
PROVIDER_KEYS = {"order", "allow_fallbacks", "require_parameters"}
PRICE_KEYS = {"prompt_usd_per_mtok", "completion_usd_per_mtok", "cached_usd_per_mtok"}
# Body fields the loop owns; setting them in extra_body would silently change the protocol.
RESERVED_BODY = {"model", "messages", "tools", "tool_choice", "stream", "n"}


@dataclass(frozen=True)
class _Where:
    file: Path
    table: str

    def error(self, key: str | None, expected: str, got: object = None) -> RegistryError:
        where = f"{self.table}.{key}" if key else self.table
        shown = "" if got is None else f", got {got!r}"
        return RegistryError(f"{self.file}: field '{where}': expected {expected}{shown}")

    def sub(self, key: str) -> _Where:
        return _Where(self.file, f"{self.table}.{key}")


def _parse_model(name: str, table: object, where: _Where) -> ModelConfig:
    if not NAME_RE.match(name):
        raise where.error(None, "a name of letters, digits, '.', '_' and '-'", name)
    if name in BUILTIN_AGENTS:
        raise where.error(None, f"a name other than the built-in agents {list(BUILTIN_AGENTS)}")
    if not isinstance(table, dict):
        raise where.error(None, "a table")
    _no_unknown(table, MODEL_KEYS, where)
    base_url = _str(table, "base_url", where, required=True)
    if not base_url.startswith(("http://", "https://")):
        raise where.error("base_url", "an http:// or https:// URL", base_url)
    api_key_env = _str(table, "api_key_env", where)
    if api_key_env and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", api_key_env):
        raise where.error(
            "api_key_env", "the NAME of an environment variable (never the key itself)", "…"
        )
    fmt = _str(table, "action_format", where) or "tools"
    if fmt not in ACTION_FORMATS:
        raise where.error("action_format", f"one of {list(ACTION_FORMATS)}", fmt)
    extra = table.get("extra_body", {})
    if not isinstance(extra, dict):
        raise where.error("extra_body", "a table")
    clash = RESERVED_BODY & set(extra)
    if clash:
        raise where.error("extra_body", f"no keys the loop sets itself ({sorted(clash)})")
    provider = _provider(table.get("provider"), where.sub("provider"))
    if provider is not None and "provider" in extra:
        raise where.error("extra_body", "no 'provider' key when a [provider] table is given")
    return ModelConfig(
        name=name,
        kind="chat",
        base_url=base_url.rstrip("/"),
        api_key_env=api_key_env,
        model=_str(table, "model", where, required=True),
        action_format=fmt,  # type: ignore[arg-type]
        sampling=_sampling(table.get("sampling"), where.sub("sampling")),
        provider=provider,
        price=_price(table.get("price"), where.sub("price")),
        max_total_tokens=_int(table, "max_total_tokens", where, minimum=1),
        max_completion_tokens=_int(table, "max_completion_tokens", where, minimum=1),
        request_timeout_s=_num(table, "request_timeout_s", where, minimum=1) or 600.0,
        retry_attempts=_or(_int(table, "retry_attempts", where, minimum=1), 6),
        retry_base_delay_s=_or(_num(table, "retry_base_delay_s", where, minimum=0), 2.0),
        retry_max_delay_s=_or(_num(table, "retry_max_delay_s", where, minimum=0), 60.0),
        extra_body=dict(extra),
        description=_str(table, "description", where),
        source=where.file,
    )


def _sampling(table: object, where: _Where) -> Sampling:
    if table is None:
        return Sampling()
    if not isinstance(table, dict):
        raise where.error(None, "a table")
    _no_unknown(table, SAMPLING_KEYS, where)
    top_p = _num(table, "top_p", where, minimum=0)
    if top_p is not None and not 0 < top_p <= 1:
        raise where.error("top_p", "a number in (0, 1]", top_p)
    top_k = _int(table, "top_k", where, minimum=-1)
    if top_k == 0:
        raise where.error("top_k", "a positive integer, or -1 for no limit", top_k)
    return Sampling(
        temperature=_num(table, "temperature", where, minimum=0),
        top_p=top_p,
        top_k=top_k,
        seed=_int(table, "seed", where),
        max_tokens=_int(table, "max_tokens", where, minimum=1),
    )


def _provider(table: object, where: _Where) -> ProviderPin | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise where.error(None, "a table")
    _no_unknown(table, PROVIDER_KEYS, where)
    order = table.get("order")
    if not isinstance(order, list) or not order or not all(isinstance(p, str) for p in order):
        raise where.error("order", "a non-empty list of provider names", order)
    fallbacks = table.get("allow_fallbacks", False)
    if not isinstance(fallbacks, bool):
        raise where.error("allow_fallbacks", "true or false", fallbacks)
    require = table.get("require_parameters")
    if require is not None and not isinstance(require, bool):
        raise where.error("require_parameters", "true or false", require)
    return ProviderPin(order=tuple(order), allow_fallbacks=fallbacks, require_parameters=require)


def _price(table: object, where: _Where) -> Price | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise where.error(None, "a table")
    _no_unknown(table, PRICE_KEYS, where)
    prompt = _num(table, "prompt_usd_per_mtok", where, minimum=0, required=True)
    completion = _num(table, "completion_usd_per_mtok", where, minimum=0, required=True)
    return Price(
        prompt_usd_per_mtok=prompt,  # type: ignore[arg-type]
        completion_usd_per_mtok=completion,  # type: ignore[arg-type]
        cached_usd_per_mtok=_num(table, "cached_usd_per_mtok", where, minimum=0),
    )


def _no_unknown(table: dict, known: set[str], where: _Where) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise where.error(unknown[0], f"one of the known keys {sorted(known)} (unknown key)")


def _str(table: dict, key: str, where: _Where, required: bool = False) -> str:
    value = table.get(key)
    if value is None:
        if required:
            raise where.error(key, "a string (required)")
        return ""
    if not isinstance(value, str):
        raise where.error(key, "a string", value)
    if required and not value.strip():
        raise where.error(key, "a non-empty string")
    return value


def _int(table: dict, key: str, where: _Where, minimum: int | None = None) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(key, "an integer", value)
    if minimum is not None and value < minimum:
        raise where.error(key, f"an integer >= {minimum}", value)
    return value


def _or(value, default):
    return default if value is None else value


def _num(
    table: dict, key: str, where: _Where, minimum: float | None = None, required: bool = False
) -> float | None:
    value = table.get(key)
    if value is None:
        if required:
            raise where.error(key, "a number (required)")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise where.error(key, "a number", value)
    if minimum is not None and value < minimum:
        raise where.error(key, f"a number >= {minimum}", value)
    return float(value)


# --- one run's sampling -------------------------------------------------------------------------


def run_seed(base: int, task_id: str, cap: int | None, attempt: int) -> int:
    """The seed one run sends: derived from the model's base seed, the task, the stated cap and
    the attempt, so two attempts are two samples and a rerun of the same run sends the same seed
    (prompt arms and faults share it: they are compared on the same sample). 31 bits, which
    every server's integer seed takes."""
    text = f"{base}|{task_id}|{'none' if cap is None else cap}|{attempt}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") >> 1


def for_run(config: ModelConfig, task_id: str, cap: int | None, attempt: int) -> ModelConfig:
    """The model as one run uses it: with a seed configured, that run's own seed."""
    base = config.sampling.seed
    if base is None:
        return config
    seed = run_seed(base, task_id, cap, attempt)
    return replace(config, sampling=replace(config.sampling, seed=seed))


def deterministic(config: ModelConfig) -> bool:
    """Greedy decoding (temperature 0): every attempt samples the same reply, whatever seed
    it sends, so repeated attempts measure one sample again."""
    return not config.builtin and config.sampling.temperature == 0

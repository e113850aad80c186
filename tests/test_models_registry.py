"""models.toml: the documented format, validation errors, where the file is found, updates."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.agents.registry import (
    BUILTIN_AGENTS,
    ModelConfig,
    Price,
    RegistryError,
    load_registry,
    parse_models,
)
from engine.agents.registry_write import entry_toml, upsert_entry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "models.example.toml"


def test_the_shipped_example_parses_with_every_kind_of_entry():
    reg = load_registry(EXAMPLE)
    assert reg.path == EXAMPLE
    for name in BUILTIN_AGENTS:
        assert reg.get(name).builtin
    local = reg.get("qwen3-8b-local")
    assert local.base_url == "http://127.0.0.1:8000/v1" and local.api_key_env == ""
    assert local.sampling.top_k == 20 and local.max_total_tokens == 32768
    routed = reg.get("qwen3-coder-or")
    assert routed.provider.body() == {
        "order": ["deepinfra/fp8", "together"],
        "allow_fallbacks": False,
    }
    assert routed.price == Price(0.40, 1.60)
    assert reg.get("gpt-4.1-mini").price.cached_usd_per_mtok == 0.10
    assert reg.get("llama3-text-fenced").action_format == "fenced"


def test_unknown_name_lists_the_known_ones():
    reg = load_registry(EXAMPLE)
    with pytest.raises(RegistryError) as err:
        reg.get("gpt-9")
    assert "unknown model or agent 'gpt-9'" in str(err.value)
    assert "oracle" in str(err.value) and "qwen3-8b-local" in str(err.value)


@pytest.mark.parametrize(
    "body, field, expected",
    [
        ('model = "m"', "models.m.base_url", "a string (required)"),
        ('base_url = "ftp://x"\nmodel = "m"', "models.m.base_url", "http:// or https://"),
        ('base_url = "http://x"', "models.m.model", "a string (required)"),
        ('base_url = "http://x"\nmodel = "m"\naction_format = "json"', "models.m.action_format",
         "one of ['tools', 'fenced', 'tags']"),
        ('base_url = "http://x"\nmodel = "m"\ntemprature = 1', "models.m.temprature",
         "unknown key"),
        ('base_url = "http://x"\nmodel = "m"\napi_key_env = "sk-abc123"', "models.m.api_key_env",
         "the NAME of an environment variable"),
        ('base_url = "http://x"\nmodel = "m"\n[models.m.sampling]\ntop_p = 1.5',
         "models.m.sampling.top_p", "(0, 1]"),
        ('base_url = "http://x"\nmodel = "m"\n[models.m.sampling]\ntemperature = "hot"',
         "models.m.sampling.temperature", "a number"),
        ('base_url = "http://x"\nmodel = "m"\n[models.m.provider]\norder = []',
         "models.m.provider.order", "a non-empty list"),
        ('base_url = "http://x"\nmodel = "m"\n[models.m.price]\nprompt_usd_per_mtok = 1',
         "models.m.price.completion_usd_per_mtok", "a number (required)"),
        ('base_url = "http://x"\nmodel = "m"\nextra_body = { tools = [] }',
         "models.m.extra_body", "no keys the loop sets itself"),
        ('base_url = "http://x"\nmodel = "m"\nmax_total_tokens = 0', "models.m.max_total_tokens",
         "an integer >= 1"),
    ],
)  # fmt: skip
def test_bad_fields_are_named_with_file_field_and_expectation(body, field, expected, tmp_path):
    path = tmp_path / "models.toml"
    path.write_text("[models.m]\n" + body + "\n")
    with pytest.raises(RegistryError) as err:
        load_registry(path)
    message = str(err.value)
    assert str(path) in message and f"'{field}'" in message and expected in message


def test_a_pasted_key_is_not_echoed_in_the_error(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[models.m]\nbase_url = "http://x"\nmodel = "m"\napi_key_env = "sk-SECRET-1"\n')
    with pytest.raises(RegistryError) as err:
        load_registry(path)
    assert "sk-SECRET-1" not in str(err.value)


def test_other_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[models.m\n")
    with pytest.raises(RegistryError, match="not valid TOML"):
        load_registry(bad)
    with pytest.raises(RegistryError, match="models file not found"):
        load_registry(tmp_path / "missing.toml")
    with pytest.raises(RegistryError, match="built-in agents"):
        parse_models('[models.oracle]\nbase_url = "http://x"\nmodel = "m"\n')
    with pytest.raises(RegistryError, match="unknown top-level"):
        parse_models('[model.x]\nbase_url = "http://x"\n')


def test_where_the_file_is_found(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("DEPTHTUI_MODELS", raising=False)
    reg = load_registry()  # no file anywhere: only the built-in agents
    assert reg.path is None and reg.names() == list(BUILTIN_AGENTS)
    default = tmp_path / "cfg" / "depthtui" / "models.toml"
    default.parent.mkdir(parents=True)
    default.write_text('[models.a]\nbase_url = "http://x"\nmodel = "a"\n')
    assert load_registry().path == default and "a" in load_registry().names()
    env_file = tmp_path / "env.toml"
    env_file.write_text('[models.b]\nbase_url = "http://x"\nmodel = "b"\n')
    monkeypatch.setenv("DEPTHTUI_MODELS", str(env_file))
    assert "b" in load_registry().names()
    flag_file = tmp_path / "flag.toml"
    flag_file.write_text('[models.c]\nbase_url = "http://x"\nmodel = "c"\n')
    assert "c" in load_registry(flag_file).names()  # --models wins over the variable


def test_api_key_comes_from_the_named_variable():
    cfg = ModelConfig(name="m", base_url="http://x", model="m", api_key_env="MY_KEY")
    assert cfg.api_key({"MY_KEY": "k1"}) == "k1"
    with pytest.raises(RegistryError, match="MY_KEY"):
        cfg.api_key({})


def test_upsert_replaces_its_own_block_and_keeps_everything_else(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(
        "# my models\n"
        '[models."qwen3.5-local"]\nbase_url = "http://old"\nmodel = "old"\n'
        '[models."qwen3.5-local".sampling]\ntemperature = 1.0\n\n'
        "# keep this one\n"
        '[models.other]\nbase_url = "http://other"\nmodel = "o"\n'
    )
    cfg = ModelConfig(name="qwen3.5-local", base_url="http://127.0.0.1:9000/v1", model="Qwen3.5")
    upsert_entry(path, cfg)
    upsert_entry(path, cfg)  # idempotent
    text = path.read_text()
    assert "# my models" in text and "# keep this one" in text
    assert "http://old" not in text and "temperature" not in text
    assert text.count('[models."qwen3.5-local"]') == 1
    reg = load_registry(path)
    assert reg.get("qwen3.5-local").base_url == "http://127.0.0.1:9000/v1"
    assert reg.get("other").model == "o"
    assert parse_models(entry_toml(cfg))["qwen3.5-local"].model == "Qwen3.5"


def test_the_retry_policy_is_set_per_model(tmp_path):
    from engine.agents.chat import ChatAgent
    from engine.agents.make import make_agent

    file = tmp_path / "models.toml"
    file.write_text(
        '[models.fast]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        "retry_attempts = 2\nretry_base_delay_s = 0\nretry_max_delay_s = 0.5\n"
        '[models.default]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    registry = load_registry(file)
    fast = make_agent(registry.get("fast"))
    default = make_agent(registry.get("default"))
    assert isinstance(fast, ChatAgent) and isinstance(default, ChatAgent)
    assert (fast.retry.max_attempts, fast.retry.base_delay_s, fast.retry.max_delay_s) == (2, 0, 0.5)
    assert (default.retry.max_attempts, default.retry.base_delay_s) == (6, 2.0)
    file.write_text('[models.bad]\nbase_url = "http://x/v1"\nmodel = "m"\nretry_attempts = 0\n')
    with pytest.raises(RegistryError, match="retry_attempts"):
        load_registry(file)

"""Every key Harbor's task.toml schema knows (Harbor 0.23-0.26), as nested tables: the loader
tolerates keys outside it with a warning that names them (fields.unknown_keys).
"""

from __future__ import annotations

from typing import Any

_HEALTHCHECK = {
    k: None
    for k in (
        "command",
        "interval_sec",
        "timeout_sec",
        "start_period_sec",
        "start_interval_sec",
        "retries",
    )
}
_AGENT = {k: None for k in ("timeout_sec", "user", "network_mode", "allowed_hosts")}
_VERIFIER = {
    k: None
    for k in (
        "timeout_sec",
        "env",
        "user",
        "network_mode",
        "allowed_hosts",
        "environment_mode",
        "environment",
        "continuous",
        "collect",
    )
}
_ENVIRONMENT: dict[str, Any] = {
    k: None
    for k in (
        "build_timeout_sec",
        "docker_image",
        "os",
        "cpus",
        "memory_mb",
        "memory",
        "storage_mb",
        "storage",
        "gpus",
        "gpu_types",
        "tpu",
        "mcp_servers",
        "env",
        "skills_dir",
        "workdir",
        "allow_internet",
        "network_mode",
        "allowed_hosts",
    )
}
_ENVIRONMENT["healthcheck"] = _HEALTHCHECK
# Every key Harbor's task.toml schema knows. Keys outside it are tolerated with a warning.
KNOWN_KEYS: dict[str, Any] = {
    "schema_version": None,
    "version": None,  # old spelling of schema_version
    "source": None,
    "multi_step_reward_strategy": None,
    "artifacts": None,
    "startup_required": None,
    "metadata": None,  # free-form
    "task": {k: None for k in ("name", "version", "description", "authors", "keywords")},
    "agent": _AGENT,
    "verifier": _VERIFIER,
    "environment": _ENVIRONMENT,
    "solution": {"env": None},
    "steps": {
        "name": None,
        "agent": _AGENT,
        "verifier": _VERIFIER,
        "min_reward": None,
        "healthcheck": _HEALTHCHECK,
        "artifacts": None,
    },
}

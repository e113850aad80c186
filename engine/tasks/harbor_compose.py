"""A Harbor task's docker-compose file: where it is, and its `main` service (the agent's
container) read the way Harbor reads it: build context and Dockerfile, or a prebuilt image, its
environment variables, and Harbor's own compose variables filled in. Other services are not
started; the loader says so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from engine.tasks.model import TaskError


def find_compose(env_dir: Path) -> Path | None:
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if (env_dir / name).is_file():
            return env_dir / name
    return None


def main_service(
    path: Path, env_dir: Path
) -> tuple[Path | None, Path | None, str | None, dict[str, str], list[str]]:
    """(context_dir, dockerfile, image, environment variables, warnings) of the compose file's
    `main` service."""
    import yaml  # only compose tasks need it

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TaskError(path, f"not valid YAML: {exc}") from exc
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict) or "main" not in services:
        raise TaskError(
            path, "expected a service named 'main' (the agent's container)", "services.main"
        )
    main = services["main"] or {}
    if not isinstance(main, dict):
        raise TaskError(path, "expected a table", "services.main")
    warnings = []
    others = sorted(k for k in services if k != "main")
    if others:
        warnings.append(
            f"{path.name}: services {', '.join(others)} are not started (depthtui runs the "
            "main service only)"
        )
    env_vars = _compose_env(main.get("environment"), path, env_dir)
    build = main.get("build")
    if isinstance(build, str):
        context = Path(os.path.normpath(env_dir / _compose_text(build, env_dir)))
        return context, context / "Dockerfile", None, env_vars, warnings
    if isinstance(build, dict):
        where = _compose_text(str(build.get("context", ".")), env_dir) or "."
        context = Path(os.path.normpath(env_dir / where))
        name = _compose_text(str(build.get("dockerfile", "Dockerfile")), env_dir) or "Dockerfile"
        return context, context / name, None, env_vars, warnings
    if build is not None:
        raise TaskError(path, f"expected a path or a table, got {build!r}", "services.main.build")
    image = main.get("image")
    # `image: ${MAIN_IMAGE_NAME}` is Harbor's own tag for the build, not a prebuilt image.
    image = _compose_text(image, env_dir).strip() if isinstance(image, str) else ""
    if image:
        return None, None, image, env_vars, warnings
    # Harbor's own base compose file builds `main` from environment/ when the task's does not
    # say otherwise.
    return env_dir, env_dir / "Dockerfile", None, env_vars, warnings


def _compose_env(value: Any, path: Path, env_dir: Path) -> dict[str, str]:
    """The main service's `environment:` (a list of NAME=value or a table), as Harbor gives it
    to the container."""
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        pairs = [v.partition("=")[::2] for v in value if "=" in v]
    elif isinstance(value, dict):
        pairs = [(str(k), "" if v is None else str(v)) for k, v in value.items()]
    else:
        raise TaskError(
            path,
            f"expected a list of NAME=value or a table, got {value!r}"[:160],
            "services.main.environment",
        )
    return {name: _compose_text(text, env_dir) for name, text in pairs}


_COMPOSE_VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?::?-([^}]*))?\}|\$([A-Za-z_]\w*)")
# What Harbor sets these compose variables to inside the container.
_HARBOR_PATHS = {
    "TEST_DIR": "/tests",
    "ENV_VERIFIER_LOGS_PATH": "/logs/verifier",
    "ENV_AGENT_LOGS_PATH": "/logs/agent",
}


def _compose_text(value: str, env_dir: Path) -> str:
    """A compose value with Harbor's variables filled in the way Harbor fills them: ${CONTEXT_DIR}
    is the environment folder, ${TEST_DIR} is /tests, a default (`${VAR:-x}`) is used; any other
    variable (${MAIN_IMAGE_NAME}, ${CPUS}, ...) is Harbor's own business and reads as empty."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name == "CONTEXT_DIR":
            return str(env_dir)
        return _HARBOR_PATHS.get(name) or match.group(2) or ""

    return _COMPOSE_VAR.sub(one, value.replace("$$", "\0")).replace("\0", "$")

"""Harbor task folders (Terminal-Bench 2.x; Harbor 0.23-0.26), including the Endless Terminals
variant that uses Harbor's layout.

    task.toml  instruction.md | [[steps]] + steps/<name>/{instruction.md,tests/,solution/,workdir/}
    environment/{Dockerfile | docker-compose.yaml}  solution/solve.sh  tests/test.sh

Choices where Harbor leaves it to the runtime (recorded here because they matter):
- agent user: [agent].user, else the Dockerfile's last USER, else root (Harbor uses the image's
  default user). Endless Terminals tasks always run as `user` (uid 1000) in /home/user.
- working directory: [environment].workdir, else the Dockerfile's last WORKDIR, else "/"
  (Docker's default). A prebuilt docker_image with neither gets "/" and a warning.
- network: on only when the task asks ([environment].allow_internet = true or network_mode
  "public"/"allowlist"); depthtui runs without network either way and warns.
- a step's verifier timeout does not fall back to the task's (600 s unless the step sets it);
  its agent timeout does. A step's verifier env adds to the task's.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from engine.tasks import dockerfile as dockerfile_mod
from engine.tasks.fields import Fields, unknown_keys
from engine.tasks.harbor_compose import find_compose, main_service
from engine.tasks.harbor_schema import KNOWN_KEYS
from engine.tasks.hashing import content_hash, walk_files
from engine.tasks.model import (
    DEFAULT_HOME,
    DEFAULT_UID,
    DEFAULT_USER,
    Environment,
    Limits,
    Segment,
    Task,
    TaskError,
)
from engine.tasks.needs import find_needs

# Files in a build context that must never be copied into the agent's image.
PRIVATE_NAMES = (
    "task.json",
    "test_initial_state.py",
    "test_final_state.py",
    "tests",
    "solution",
    "solutions",
)
# Lines of a tests/test.sh that reach for the network (Terminal-Bench's usual preamble).
_NETWORK_RE = re.compile(
    r"\b(curl|wget)\b|\bapt(-get)?\s+(update|install)\b|\bpip3?\s+install\b|\buvx?\b"
    r"|astral\.sh|\bgit\s+clone\b"
)
_CANARY_RE = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)
_STEP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def read_toml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise TaskError(path, f"cannot be read: {exc.strerror}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(path, f"not valid TOML: {exc}") from exc


def read_text(path: Path, what: str) -> str:
    if not path.is_file():
        raise TaskError(path, f"missing: expected {what}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def read_instruction(path: Path, what: str) -> str:
    text = read_text(path, what)
    lines = text.split("\n")
    # Harbor strips leading provenance ("canary") comment lines; the agent never sees them.
    start = 0
    while start < len(lines) and _CANARY_RE.match(lines[start].strip()):
        start += 1
    text = "\n".join(lines[start:]).strip("\n")
    if not text.strip():
        raise TaskError(path, f"is empty: expected {what}")
    return text + "\n"


def is_endless(folder: Path) -> bool:
    """Endless Terminals' Harbor-layout variant: pytest on tests/test_final_state.py, and the
    generator's private environment/task.json."""
    return (folder / "tests" / "test_final_state.py").is_file() or (
        folder / "environment" / "task.json"
    ).is_file()


def _files(folder: Path) -> dict[str, Path]:
    return dict(walk_files(folder)) if folder.is_dir() else {}


def _solution(folder: Path) -> tuple[str | None, Path | None]:
    solve = folder / "solve.sh"
    if not solve.is_file():
        return None, folder if folder.is_dir() else None
    return read_text(solve, "the reference solution script"), folder


def _network_preamble(test_sh: Path, rel: str) -> list[str]:
    try:
        text = test_sh.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    hits = [
        f"line {n}: {line.strip()[:60]}"
        for n, line in enumerate(text.splitlines(), start=1)
        if not line.strip().startswith("#") and _NETWORK_RE.search(line)
    ]
    if not hits:
        return []
    return [
        f"{rel} reaches for the network ({'; '.join(hits[:3])}); offline runs replace that "
        "preamble with the trusted pytest"
    ]


# --- environment --------------------------------------------------------------------------------


def _check_dockerfile(path: Path) -> dockerfile_mod.DockerfileInfo:
    text = read_text(path, "a Dockerfile")
    info = dockerfile_mod.parse(text)
    if not info.instructions:
        raise TaskError(path, "is empty: expected Docker instructions starting with FROM")
    if not any(ins.keyword == "FROM" for ins in info.instructions):
        raise TaskError(path, "has no FROM instruction: expected 'FROM <image>'")
    return info


def environment(
    folder: Path, env: Fields
) -> tuple[Environment, dockerfile_mod.DockerfileInfo | None, list[str]]:
    env_dir = folder / "environment"
    warnings: list[str] = []
    image = env.text("docker_image")
    context: Path | None = None
    dockerfile: Path | None = None
    compose = find_compose(env_dir)
    compose_env: dict[str, str] = {}
    if compose is not None:
        context, dockerfile, compose_image, compose_env, more = main_service(compose, env_dir)
        warnings += more
        image = image or compose_image
        if dockerfile is not None and not dockerfile.is_file():
            if image:
                context = dockerfile = None
            else:
                raise TaskError(
                    dockerfile,
                    f"missing: {compose.name}'s main service builds from it "
                    "(expected a Dockerfile there, or `image:` on the main service)",
                )
    elif (env_dir / "Dockerfile").exists():
        context, dockerfile = env_dir, env_dir / "Dockerfile"
    elif not image:
        raise TaskError(
            env_dir / "Dockerfile",
            "missing: expected environment/Dockerfile, environment/docker-compose.yaml, or "
            "[environment].docker_image in task.toml",
        )
    info = _check_dockerfile(dockerfile) if dockerfile is not None else None

    private = tuple(
        name for name in PRIVATE_NAMES if context is not None and (context / name).exists()
    )
    if info is not None and dockerfile is not None:
        rel = _rel(dockerfile, folder)
        for line, base in info.base_images:
            if dockerfile_mod.needs_substitute(base):
                warnings.append(
                    f"{rel} line {line}: FROM {base} may need substituting (no registry "
                    "reachable offline)"
                )
        for line, src in info.context_sources:
            leaked = [p for p in private if dockerfile_mod.copies_private(src, p)]
            if leaked:
                warnings.append(
                    f"{rel} line {line}: COPY {src} takes private {', '.join(leaked)} into the "
                    "agent's image"
                )
        entrypoint = _final_entrypoint(info)
        if entrypoint is not None:
            warnings.append(
                f"{rel} line {entrypoint.line}: {SERVICES_NOTE} (ENTRYPOINT {entrypoint.args}): "
                "what it starts is started again from the task's image for grading, and the "
                "tests reach it over loopback and the /etc/hosts it writes"
            )
    if image and dockerfile_mod.needs_substitute(image):
        warnings.append(
            f"docker_image {image} may need substituting (no registry reachable offline)"
        )

    allow_internet = env.flag("allow_internet", None)
    mode = env.text("network_mode")
    if mode is not None:
        if mode not in ("public", "no-network", "allowlist"):
            raise env.error("network_mode", "'public', 'no-network' or 'allowlist'", mode)
        allow_internet = mode != "no-network"
    if allow_internet:
        warnings.append("the task asks for network access; depthtui runs it without network")
    gpus = env.integer("gpus", 0) or 0
    if gpus > 0:
        warnings.append(f"the task asks for {gpus} GPU(s); depthtui provides none")

    return (
        Environment(
            context_dir=context,
            dockerfile=dockerfile,
            image=image,
            build_timeout_sec=env.number("build_timeout_sec", 600.0) or 600.0,
            env={**compose_env, **env.str_map("env")},
            private_files=private,
            allow_internet=bool(allow_internet),
            healthcheck=env.healthcheck("healthcheck"),
        ),
        info,
        warnings,
    )


# Said at import of a task whose image has an ENTRYPOINT (engine/verify/services.py).
SERVICES_NOTE = "graded beside its entrypoint's services"


def _final_entrypoint(
    info: dockerfile_mod.DockerfileInfo,
) -> dockerfile_mod.Instruction | None:
    """The final stage's ENTRYPOINT instruction, when the Dockerfile sets one."""
    found = None
    for ins in info.instructions:
        if ins.keyword == "FROM":
            found = None
        elif ins.keyword == "ENTRYPOINT" and ins.args.strip() not in ("", "[]"):
            found = ins
    return found


def _size_mb(env: Fields, key_mb: str, key_old: str, default: int | None) -> int | None:
    value = env.integer(key_mb, None, minimum=1)
    old = env.data.get(key_old)
    if old is None:
        return default if value is None else value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([GMK])B?\s*", str(old), re.IGNORECASE)
    if not match:
        raise env.error(key_old, "a size like '2G' or '512M'", old)
    number, unit = float(match.group(1)), match.group(2).upper()
    mb = int(number * 1024) if unit == "G" else int(number) if unit == "M" else int(number / 1024)
    if value is not None and value != mb:
        raise env.error(key_old, f"the same size as {env.name(key_mb)} = {value}", old)
    return mb


def limits(top: Fields, env: Fields) -> Limits:
    agent, verifier = top.table("agent"), top.table("verifier")
    return Limits(
        cpus=env.number("cpus", 1.0) or 1.0,
        memory_mb=_size_mb(env, "memory_mb", "memory", 2048) or 2048,
        storage_mb=_size_mb(env, "storage_mb", "storage", None),
        agent_timeout_sec=agent.number("timeout_sec", None),
        verifier_timeout_sec=verifier.number("timeout_sec", 600.0) or 600.0,
    )


# --- segments -----------------------------------------------------------------------------------


def _tests_or_error(tests: dict[str, Path], where: Path, endless: bool) -> None:
    if not tests:
        raise TaskError(
            where,
            "missing: expected tests/test.sh (Harbor)"
            + (" or tests/test_final_state.py (Endless Terminals)" if endless else ""),
        )
    if "test.sh" not in tests and not (endless and "test_final_state.py" in tests):
        listed = ", ".join(sorted(tests)[:5])
        raise TaskError(
            where,
            f"unknown verifier layout: it holds {listed} but no test.sh (Harbor)"
            + (" and no test_final_state.py (Endless Terminals)" if endless else ""),
        )


def single_segment(folder: Path, top: Fields, endless: bool) -> Segment:
    instruction = read_instruction(folder / "instruction.md", "the task's instruction (Markdown)")
    tests = _files(folder / "tests")
    _tests_or_error(tests, folder / "tests", endless)
    script, solution_dir = _solution(folder / "solution")
    return Segment(
        name="main",
        instruction=instruction,
        tests=tests,
        solution_script=script,
        solution_dir=solution_dir,
        agent_timeout_sec=top.table("agent").number("timeout_sec", None),
        verifier_timeout_sec=top.table("verifier").number("timeout_sec", 600.0) or 600.0,
        verifier_env=top.table("verifier").str_map("env"),
        solution_env=top.table("solution").str_map("env"),
    )


def step_segments(folder: Path, top: Fields, raw_steps: Any) -> list[Segment]:
    path = folder / "task.toml"
    if not isinstance(raw_steps, list) or not all(isinstance(s, dict) for s in raw_steps):
        raise TaskError(path, "expected [[steps]] tables", "steps")
    shared_tests = _files(folder / "tests")
    task_agent_timeout = top.table("agent").number("timeout_sec", None)
    task_verifier_env = top.table("verifier").str_map("env")
    solution_env = top.table("solution").str_map("env")
    segments: list[Segment] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_steps):
        step = Fields(raw, path, f"steps[{i}]")
        name = step.text("name", required=True) or ""
        if not _STEP_NAME_RE.match(name):
            raise step.error("name", "a folder name (letters, digits, '.', '_', '-')", name)
        if name in seen:
            raise step.error("name", "a name no other step uses", name)
        seen.add(name)
        step_dir = folder / "steps" / name
        if not step_dir.is_dir():
            raise TaskError(
                step_dir,
                f"missing: [[steps]] entry '{name}' needs the folder steps/{name}/ with "
                "instruction.md",
                f"steps[{i}].name",
            )
        try:
            instruction = read_instruction(
                step_dir / "instruction.md", f"the instruction of step '{name}' (Markdown)"
            )
        except TaskError as exc:
            raise TaskError(exc.path, exc.reason, f"steps[{i}]") from None
        # A step's own test files win over the shared tests/ files of the same name.
        tests = {**shared_tests, **_files(step_dir / "tests")}
        _tests_or_error(tests, step_dir / "tests", endless=False)
        script, solution_dir = _solution(step_dir / "solution")
        workdir = step_dir / "workdir"
        setup = workdir / "setup.sh"
        agent, verifier = step.table("agent"), step.table("verifier")
        segments.append(
            Segment(
                name=name,
                instruction=instruction,
                tests=tests,
                solution_script=script,
                solution_dir=solution_dir,
                workdir_dir=workdir if workdir.is_dir() else None,
                setup_script=setup if setup.is_file() else None,
                agent_timeout_sec=agent.number("timeout_sec", task_agent_timeout),
                # Harbor: a step's verifier timeout does not fall back to the task's.
                verifier_timeout_sec=verifier.number("timeout_sec", 600.0) or 600.0,
                min_reward=step.min_reward("min_reward"),
                healthcheck=step.healthcheck("healthcheck"),
                verifier_env={**task_verifier_env, **verifier.str_map("env")},
                solution_env=solution_env,
            )
        )
    return segments


# --- the task -----------------------------------------------------------------------------------


def _rel(path: Path, folder: Path) -> str:
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        return str(path)


def _agent_identity(
    agent: Fields,
    env_vars: dict[str, str],
    info: dockerfile_mod.DockerfileInfo | None,
) -> tuple[str, int, str]:
    user = agent.user("user")
    if user is None:
        user = info.user if info is not None and info.user else "root"
    if isinstance(user, int) or user.isdigit():
        uid = int(user)
        name = "root" if uid == 0 else DEFAULT_USER if uid == DEFAULT_UID else str(uid)
    else:
        name = user
        known = info.user_ids if info is not None else {}
        # Otherwise a named user's uid is only known inside the image: 1000 is a guess the
        # sandbox checks there.
        uid = 0 if name == "root" else known.get(name, DEFAULT_UID)
    home = env_vars.get("HOME") or ("/root" if uid == 0 else f"/home/{name}")
    return name, uid, home


def load(folder: Path, dataset: str) -> Task:
    path = folder / "task.toml"
    data = read_toml(path)
    top = Fields(data, path)
    warnings: list[str] = []

    unknown = unknown_keys(data, KNOWN_KEYS)
    if unknown:
        warnings.append(f"task.toml: unknown keys ignored: {', '.join(unknown)}")
    if "version" in data and "schema_version" not in data:
        top.text("version")  # the old spelling of schema_version; it must still be a string
    schema_version = top.text("schema_version") or top.text("version") or ""

    raw_steps = data.get("steps")
    endless = not raw_steps and is_endless(folder)
    env_table = top.table("environment")
    env, info, env_warnings = environment(folder, env_table)
    warnings += env_warnings
    lim = limits(top, env_table)

    strategy = top.text("multi_step_reward_strategy", "mean") or "mean"
    if strategy not in ("mean", "final"):
        raise top.error("multi_step_reward_strategy", "'mean' or 'final'", strategy)
    if raw_steps:
        segments = step_segments(folder, top, raw_steps)
        if (folder / "instruction.md").exists():
            warnings.append("instruction.md is not used: task.toml has [[steps]]")
    else:
        segments = [single_segment(folder, top, endless)]
    for segment in segments:
        test_sh = segment.tests.get("test.sh")
        if test_sh is not None:
            prefix = "" if not raw_steps else f"step '{segment.name}': "
            warnings += [prefix + w for w in _network_preamble(test_sh, _rel(test_sh, folder))]

    modes = [top.table("verifier").text("environment_mode")] + [
        Fields(raw, path, f"steps[{i}]").table("verifier").text("environment_mode")
        for i, raw in enumerate(raw_steps or [])
    ]
    if "separate" in modes:
        warnings.append(
            "[verifier].environment_mode = 'separate' is not supported: depthtui runs test.sh "
            "in a snapshot of the agent's container"
        )

    agent = top.table("agent")
    workdir = env_table.text("workdir")
    if workdir is not None and not workdir.startswith("/"):
        raise env_table.error("workdir", "an absolute path", workdir)
    if endless:
        user, uid, home = DEFAULT_USER, DEFAULT_UID, DEFAULT_HOME
        asked = agent.user("user")
        if asked is not None and str(asked) not in (DEFAULT_USER, str(DEFAULT_UID)):
            warnings.append(
                f"[agent].user = {asked!r} ignored: Endless Terminals tasks run as "
                f"'{DEFAULT_USER}' (uid {DEFAULT_UID})"
            )
        workdir = workdir or DEFAULT_HOME
    else:
        user, uid, home = _agent_identity(agent, env.env, info)
        if workdir is None:
            workdir = info.workdir if info is not None and info.workdir else "/"
            if info is None:
                warnings.append(
                    f"working directory of prebuilt image {env.image} is unknown; using '/' "
                    "(set [environment].workdir)"
                )

    task_table = top.table("task")
    metadata: dict[str, Any] = dict(top.table("metadata").data)
    if schema_version:
        metadata["schema_version"] = schema_version
    for key in ("keywords", "authors"):
        if task_table.has(key):
            metadata[key] = task_table.data[key]
    summary = folder / "solution" / "o3_summary.json"
    if summary.is_file():
        try:
            metadata["o3_summary"] = json.loads(summary.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            warnings.append(f"solution/o3_summary.json is not valid JSON ({exc}); ignored")

    return Task(
        id=f"{dataset}/{folder.name}",
        dataset=dataset,
        format="endless" if endless else "harbor",
        source_path=folder,
        content_hash=content_hash(folder),
        segments=tuple(segments),
        environment=env,
        limits=lim,
        verifier_kind="pytest"
        if endless and "test_final_state.py" in segments[0].tests
        else "harbor",
        agent_user=user,
        agent_uid=uid,
        workdir=workdir,
        home=home,
        name=task_table.text("name") or folder.name,
        description=task_table.text("description") or "",
        reward_strategy=strategy,  # type: ignore[arg-type]
        metadata=metadata,
        warnings=tuple(warnings),
        needs=_needs(folder, env_table, env, segments),
    )


def _needs(folder: Path, env_table: Fields, env: Environment, segments: list[Segment]) -> tuple:
    """What the task needs beyond one offline container (engine/tasks/needs.py)."""
    compose = find_compose(folder / "environment")
    services: list[str] = []
    if compose is not None:
        import yaml

        doc = yaml.safe_load(compose.read_text(encoding="utf-8")) or {}
        services = [k for k in (doc.get("services") or {}) if k != "main"]
    dockerfile = None
    if env.dockerfile is not None and env.dockerfile.is_file():
        dockerfile = (_rel(env.dockerfile, folder), env.dockerfile.read_text(errors="replace"))
    script = next((s.solution_script for s in segments if s.solution_script), None)
    return find_needs(
        dockerfile=dockerfile,
        services=services,
        compose_name=compose.name if compose is not None else "docker-compose.yaml",
        environment=env_table.data,
        network_allowed=env.allow_internet,
        solution=("solution/solve.sh", script) if script else None,
    )

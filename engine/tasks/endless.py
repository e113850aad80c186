"""Endless Terminals tasks as its generator writes them (no task.toml):

    task.json (description, truth, name)  container.def (Apptainer)
    test_initial_state.py  test_final_state.py  [solutions/summary.json]

The agent is `user` (uid 1000) in /home/user; the verifier is pytest on test_final_state.py.
task.json's truth and both test files sit in the build context but never enter the image.
There is no reference solution, so W is unknown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.tasks import apptainer
from engine.tasks.dockerfile import copies_private, needs_substitute
from engine.tasks.harbor import read_text
from engine.tasks.hashing import content_hash
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

PRIVATE = (
    "task.json",
    "container.sif",
    "test_initial_state.py",
    "test_final_state.py",
    "solution",
    "solutions",
    "tests",
)


def is_native(folder: Path) -> bool:
    return (folder / "task.json").is_file() and (folder / "container.def").is_file()


def _task_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(path, f"not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise TaskError(path, "expected a JSON object with a 'description'")
    return doc


def load(folder: Path, dataset: str) -> Task:
    doc = _task_json(folder / "task.json")
    description = doc.get("description", doc.get("task_description"))
    if not isinstance(description, str) or not description.strip():
        raise TaskError(
            folder / "task.json",
            f"expected the task's instruction as a non-empty string, got {description!r}",
            "description",
        )

    def_path = folder / "container.def"
    def_text = read_text(def_path, "an Apptainer definition")
    try:
        defn = apptainer.parse_definition(def_text)
        owner = apptainer.HomeOwner(DEFAULT_HOME, DEFAULT_USER, DEFAULT_UID)
        dockerfile_text, warnings = apptainer.to_dockerfile(defn, "container.def", owner)
    except apptainer.ApptainerError as exc:
        raise TaskError(def_path, str(exc)) from exc
    image, _ = apptainer.base_image(defn)
    if needs_substitute(image):
        warnings.append(
            f"container.def: From {image} may need substituting (no registry reachable offline)"
        )
    private = tuple(name for name in PRIVATE if (folder / name).exists())
    for src in apptainer.copied_sources(defn):
        leaked = [p for p in private if copies_private(src, p)]
        if leaked:
            warnings.append(
                f"container.def: %files {src} takes private {', '.join(leaked)} into the "
                "agent's image"
            )

    final = folder / "test_final_state.py"
    if not final.is_file():
        raise TaskError(final, "missing: expected the pytest file that grades the final state")
    script = None
    solution_dir = folder / "solution"
    if (solution_dir / "solve.sh").is_file():
        script = read_text(solution_dir / "solve.sh", "the reference solution script")

    metadata: dict[str, Any] = {}
    summary = folder / "solutions" / "summary.json"
    if summary.is_file():
        try:
            metadata["summary"] = json.loads(summary.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            warnings.append(f"solutions/summary.json is not valid JSON ({exc}); ignored")

    segment = Segment(
        name="main",
        instruction=description.strip() + "\n",
        tests={"test_final_state.py": final},
        solution_script=script,
        solution_dir=solution_dir if script is not None else None,
    )
    name = doc.get("name")
    return Task(
        id=f"{dataset}/{folder.name}",
        dataset=dataset,
        format="endless-native",
        source_path=folder,
        content_hash=content_hash(folder),
        segments=(segment,),
        environment=Environment(
            context_dir=folder,
            dockerfile=None,
            dockerfile_text=dockerfile_text,
            private_files=private,
        ),
        limits=Limits(),
        verifier_kind="pytest",
        agent_user=DEFAULT_USER,
        agent_uid=DEFAULT_UID,
        workdir=DEFAULT_HOME,
        home=DEFAULT_HOME,
        name=name if isinstance(name, str) and name else folder.name,
        metadata=metadata,
        warnings=tuple(warnings),
        needs=find_needs(dockerfile=("container.def", def_text)),
    )

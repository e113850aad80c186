"""Finding and loading task folders in every supported format.

    load_task(folder)  -> Task, or TaskError naming the file, the field and what was expected
    load_tasks(paths)  -> (tasks, errors): dataset folders are expanded, broken tasks are skipped

Formats, by what the folder holds:
    task.toml                          Harbor (single instruction or [[steps]]); Endless Terminals'
                                       Harbor layout when tests/test_final_state.py or
                                       environment/task.json is there
    task.json + container.def          Endless Terminals' generator output (Apptainer)

A task's id is "<dataset>/<folder name>" where the dataset is the parent folder's name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from engine.tasks import endless, harbor
from engine.tasks.dataset import DatasetInfo, read_dataset_info
from engine.tasks.model import Task, TaskError

# Anything that says "a task was meant to be here", so a broken task folder is reported as a
# broken task instead of being searched for tasks inside it.
_TASK_MARKERS = (
    "task.toml",
    "task.json",
    "container.def",
    "instruction.md",
    "environment",
    "tests",
    "steps",
    "solution",
)


def looks_like_task(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in _TASK_MARKERS)


def load_task(path: Path | str) -> Task:
    folder = Path(os.path.abspath(path))
    if not folder.is_dir():
        raise TaskError(folder, "not a folder: expected a task folder")
    dataset = folder.parent.name
    if (folder / "task.toml").is_file():
        task = harbor.load(folder, dataset)
    elif endless.is_native(folder):
        task = endless.load(folder, dataset)
    elif (folder / "task.json").is_file():
        raise TaskError(
            folder / "container.def",
            "missing: an Endless Terminals task needs container.def (Apptainer) beside task.json",
        )
    elif (folder / "instruction.md").is_file():
        raise TaskError(folder / "task.toml", "missing: a Harbor task needs task.toml")
    else:
        raise TaskError(
            folder,
            "unknown task layout: expected task.toml (Harbor, Endless Terminals) or task.json + "
            "container.def (Endless Terminals generator)",
        )
    # The same oddity can be reported by two segments sharing a file; say it once.
    unique = tuple(dict.fromkeys(task.warnings))
    if unique != task.warnings:
        task = replace(task, warnings=unique)
    return task


def _subfolders(folder: Path) -> list[Path]:
    return sorted(
        child
        for child in folder.iterdir()
        if child.is_dir() and not child.name.startswith((".", "_"))
    )


def task_folders(path: Path, errors: list[TaskError]) -> Iterator[Path]:
    """The task folders a user meant by `path`: itself when it is a task folder, else each
    subfolder of a dataset folder (a folder of datasets is expanded one level further)."""
    if not path.is_dir() or looks_like_task(path):
        yield path
        return
    children = _subfolders(path)
    for child in children:
        if not looks_like_task(child) and any(looks_like_task(g) for g in _subfolders(child)):
            yield from task_folders(child, errors)
        else:
            yield child  # a task folder, or a broken one that load_task explains
    if not children:
        errors.append(
            TaskError(
                path,
                "no task folders here: expected task.toml or task.json + container.def in this "
                "folder or in its subfolders",
            )
        )


def load_tasks(paths: Iterable[Path | str]) -> tuple[list[Task], list[TaskError]]:
    """Every task under `paths`, and one error per folder that could not be loaded."""
    tasks: list[Task] = []
    errors: list[TaskError] = []
    seen: dict[str, Path] = {}
    attempted: set[Path] = set()
    for raw in paths:
        path = Path(os.path.abspath(raw))
        if not path.exists():
            errors.append(
                TaskError(path, "does not exist: expected a task folder or a dataset folder")
            )
            continue
        for folder in task_folders(path, errors):
            if folder in attempted:
                continue  # named twice (a dataset and one of its tasks): load it once
            attempted.add(folder)
            try:
                task = load_task(folder)
            except TaskError as exc:
                exc.folder = folder
                errors.append(exc)
                continue
            except OSError as exc:
                error = TaskError(folder, f"cannot be read: {exc}")
                error.folder = folder
                errors.append(error)
                continue
            if task.id in seen:
                error = TaskError(
                    folder, f"duplicate task id {task.id} (also loaded from {seen[task.id]})"
                )
                error.folder = folder
                errors.append(error)
                continue
            seen[task.id] = folder
            tasks.append(task)
    return tasks, errors


def datasets_of(tasks: Iterable[Task]) -> tuple[list[DatasetInfo], list[TaskError]]:
    """The dataset folders the tasks came from, with their dataset.toml (if any)."""
    infos: list[DatasetInfo] = []
    errors: list[TaskError] = []
    for folder in sorted({t.source_path.parent for t in tasks}):
        try:
            infos.append(read_dataset_info(folder))
        except TaskError as exc:
            errors.append(exc)
            infos.append(DatasetInfo(name=folder.name, path=folder))
    return infos, errors

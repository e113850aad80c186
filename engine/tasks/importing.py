"""Loading task folders into the store: datasets, tasks, and the reasons broken folders failed.
Shared by `depthtui tasks import` and every verb that accepts paths."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.tasks.loader import DatasetInfo, datasets_of, load_tasks
from engine.tasks.model import Task, TaskError
from store import tasks as task_store
from store.db import Store


@dataclass(frozen=True)
class Imported:
    tasks: list[Task]
    datasets: list[DatasetInfo]
    errors: list[TaskError]


def import_paths(store: Store, paths: Iterable[Path]) -> Imported:
    """Load every task under `paths` into the store; broken folders are recorded with their
    reason and skipped, the rest still load."""
    tasks, errors = load_tasks(paths)
    infos, dataset_errors = datasets_of(tasks)
    for info in infos:
        task_store.upsert_dataset(
            store,
            info.name,
            info.path,
            title=info.title,
            description=info.description,
            group=info.group,
        )
    for task in tasks:
        task_store.upsert_task(store, task)
    for error in errors:
        if error.folder is not None:
            task_store.record_task_error(store, error.folder, error.folder.parent.name, str(error))
    return Imported(tasks, infos, errors + dataset_errors)

"""A dataset is a folder of task folders. An optional `dataset.toml` in it says more:

name = "demo"                 # a display title; the folder's name stays the dataset's id
description = "..."
group = "ours"                # synthetic | human | ours (plots colour datasets by it)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.tasks.fields import Fields, unknown_keys
from engine.tasks.harbor import read_toml

GROUPS = ("synthetic", "human", "ours")
FILENAME = "dataset.toml"


@dataclass(frozen=True)
class DatasetInfo:
    name: str  # the folder's name: task ids start with it
    path: Path
    title: str = ""
    description: str = ""
    group: str | None = None
    warnings: tuple[str, ...] = ()


def read_dataset_info(folder: Path) -> DatasetInfo:
    """What the folder's dataset.toml says, or a bare DatasetInfo when it has none.
    Raises TaskError naming dataset.toml and the field when the file is malformed."""
    path = folder / FILENAME
    if not path.is_file():
        return DatasetInfo(name=folder.name, path=folder)
    data = read_toml(path)
    fields = Fields(data, path)
    group = fields.text("group")
    if group is not None and group not in GROUPS:
        raise fields.error("group", " or ".join(repr(g) for g in GROUPS), group)
    unknown = unknown_keys(data, {"name": None, "description": None, "group": None})
    warnings = (f"dataset.toml: unknown keys ignored: {', '.join(unknown)}",) if unknown else ()
    return DatasetInfo(
        name=folder.name,
        path=folder,
        title=fields.text("name") or "",
        description=fields.text("description") or "",
        group=group,
        warnings=warnings,
    )

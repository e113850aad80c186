"""`--executor local|ray` and `--ray-address`, added to every running verb in one place.

Where episodes run is a runtime setting, not a job parameter (docs/ray.md): the options are
not stored with the job. `with_executor(verb)` gives a verb the two options and makes the
choice `current()` while the verb runs, for `launch` to hand to the runner or the engine.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer

from engine.jobs.executor import (
    EXECUTOR_FLAG,
    EXECUTORS,
    LOCAL_CHOICE,
    RAY_ADDRESS_FLAG,
    ExecutorChoice,
)

ExecutorOpt = Annotated[
    str,
    typer.Option(
        EXECUTOR_FLAG,
        help="Where episodes run: local (this machine's Docker) or ray (a Ray cluster's nodes "
        "with the 'docker' resource; docs/ray.md).",
        show_default=True,
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        RAY_ADDRESS_FLAG,
        help="The Ray cluster to use with --executor ray (default: RAY_ADDRESS, else a local "
        "Ray instance).",
    ),
]

_current: contextvars.ContextVar[ExecutorChoice] = contextvars.ContextVar(
    "executor", default=LOCAL_CHOICE
)


def executor_choice(executor: str, ray_address: str | None) -> ExecutorChoice:
    """The choice the options name; a clear error for a bad one."""
    try:
        return ExecutorChoice(executor, ray_address)
    except ValueError as exc:
        raise typer.BadParameter(
            str(exc) + f" ({EXECUTOR_FLAG} takes {' or '.join(EXECUTORS)})"
        ) from exc


def current() -> ExecutorChoice:
    """The executor the running verb was given (local when none)."""
    return _current.get()


def with_executor(verb: Callable[..., Any]) -> Callable[..., Any]:
    """`verb` with the two options added to its signature (after its own)."""

    @functools.wraps(verb)
    def wrapped(*args: Any, executor: str = "local", ray_address: str | None = None, **kw: Any):
        token = _current.set(executor_choice(executor, ray_address))
        try:
            return verb(*args, **kw)
        finally:
            _current.reset(token)

    # The verbs' modules use postponed annotations: resolve them where the verb lives.
    hints = typing.get_type_hints(verb, include_extras=True)
    sig = inspect.signature(verb)
    own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
    extra = [
        inspect.Parameter(
            "executor", inspect.Parameter.KEYWORD_ONLY, default="local", annotation=ExecutorOpt
        ),
        inspect.Parameter(
            "ray_address", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=RayAddressOpt
        ),
    ]
    wrapped.__signature__ = sig.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
    wrapped.__annotations__ = {**hints, "executor": ExecutorOpt, "ray_address": RayAddressOpt}
    return wrapped

"""Grading one segment of an episode: its tests on a snapshot of the agent's container, in a
fresh container (pytest_verifier.py or harbor_verifier.py by the task's verifier kind), as one
`Grade` per segment. What the grades add up to (reward, outcome) is outcome.py's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.oracle.contract import Contract
from engine.sandbox.base import Sandbox
from engine.sandbox.labels import LABEL_EPISODE, LABEL_JOB, LABEL_TASK
from engine.tasks.model import Task
from engine.verify import harbor_verifier, pytest_verifier
from engine.verify.root_changes import changed_paths, root_changes


@dataclass(frozen=True)
class Grade:
    passed: bool
    rewards: dict[str, float]
    tests_passed: int
    tests_total: int
    results: list[dict]
    output: str
    error_kind: str | None = None
    error_detail: str | None = None
    # The tests ran agent code where it could forge this grade (evidence: file:line: what).
    forgeable: tuple[str, ...] = ()
    # Whether tests_passed/tests_total count tests (every pytest verdict; a Harbor test.sh
    # that runs pytest) or only say the reward file's verdict as 1/1 or 0/1.
    per_test: bool = True


def grade_sandbox(
    sandbox: Sandbox,
    task: Task,
    idx: int,
    contract: Contract | None,
    job_id: int | None,
    episode_id: int,
    meanwhile: Callable[[], None] | None = None,
    image: str | None = None,
    task_image: str | None = None,
) -> Grade:
    """Grade segment `idx` on a snapshot of the sandbox as it is now, or on `image`, one taken
    already (the snapshot goes after). `meanwhile` runs in a thread while the snapshot is
    graded (the last segment removes the agent's container then: nothing needs it any more)."""
    image = image or sandbox.snapshot()
    # Listed before `meanwhile` may remove the container; it equals the snapshot (the agent is
    # stopped or frozen by now).
    changed = _root_changes(sandbox, task)
    worker = None
    if meanwhile is not None:
        worker = threading.Thread(target=meanwhile, daemon=True)
        worker.start()
    try:
        grade = grade_snapshot(
            task,
            idx,
            image,
            contract,
            job_id,
            episode_id,
            agent=(sandbox.agent_uid, sandbox.agent_gid),
            task_image=task_image,
        )
        return replace(grade, forgeable=grade.forgeable + changed) if changed else grade
    finally:
        if worker is not None:
            worker.join()
        sandbox.remove_snapshot(image)


def _root_changes(sandbox: Sandbox, task: Task) -> tuple[str, ...]:
    """For a Harbor task whose agent ran as root: what it changed among the programs test.sh
    may run (root_changes.py), as forgeable evidence. A pytest task's runner is the trusted
    toolchain's and is not concerned."""
    api = getattr(sandbox, "api", None)  # a Docker sandbox's (test doubles have none)
    if task.verifier_kind != "harbor" or sandbox.agent_uid != 0 or api is None:
        return ()
    before = getattr(sandbox, "changes_before_agent", None) or frozenset()
    return root_changes(
        api, sandbox.container_id, home=task.home, workdir=task.workdir, before=before
    )


def note_changes_before_agent(sandbox: Sandbox, task: Task) -> None:
    """Before the first segment's turns: what the container changed so far (its ENTRYPOINT,
    the first setup.sh, the harness), which _root_changes does not blame on a root agent."""
    api = getattr(sandbox, "api", None)
    if task.verifier_kind == "harbor" and sandbox.agent_uid == 0 and api is not None:
        sandbox.changes_before_agent = changed_paths(api, sandbox.container_id)  # type: ignore[attr-defined]


def grade_snapshot(
    task: Task,
    idx: int,
    image: str,
    contract: Contract | None,
    job_id: int | None,
    episode_id: int,
    agent: tuple[int, int] | None = None,
    task_image: str | None = None,
) -> Grade:
    """Grade segment `idx` of `task` on snapshot `image`. `agent` is the agent's (uid, gid) as
    the container has them, when they differ from what the task says. `task_image`: the task's
    own image (what the verifier asks whether test.sh's apt packages are installed)."""
    labels = {
        LABEL_TASK: task.id,
        LABEL_JOB: str(job_id or ""),
        LABEL_EPISODE: str(episode_id),
    }
    inventory = None
    if contract is not None and not task.multi_segment and contract.tests:
        inventory = list(contract.tests)
    if task.verifier_kind == "pytest":
        verdict = pytest_verifier.run_pytest_verifier(
            pytest_verifier.spec_for(
                task,
                idx,
                image,
                labels=labels,
                **({"uid": agent[0], "gid": agent[1]} if agent else {}),
            ),
            inventory,
        )
        return Grade(
            passed=verdict.complete,
            rewards={"reward": 1.0 if verdict.complete else 0.0},
            tests_passed=verdict.tests_passed,
            tests_total=verdict.tests_total,
            results=[r.row() for r in verdict.results],
            output=verdict.output,
            error_kind=verdict.error_kind,
            error_detail=verdict.error_detail,
            forgeable=verdict.risk if verdict.forgeable else (),
        )
    harbor = harbor_verifier.run_harbor_verifier(
        harbor_verifier.spec_for(task, idx, image, labels=labels, task_image=task_image),
        inventory,
    )
    return Grade(
        passed=harbor.passed,
        rewards=dict(harbor.rewards),
        tests_passed=harbor.tests_passed if harbor.per_test else int(harbor.passed),
        tests_total=harbor.tests_total if harbor.per_test else 1,
        results=[r.row() for r in harbor.results],
        output=harbor.output,
        error_kind=harbor.error_kind,
        error_detail=harbor.error_detail,
        forgeable=harbor.risk if harbor.forgeable else (),
        per_test=harbor.per_test,
    )


def forgeable_mark(grades: Sequence[Grade]) -> dict[str, Any]:
    """The episode's mark: any segment graded on tests that ran agent code where it could forge
    the grade."""
    # Each finding once, though every segment's tests may repeat it.
    evidence = list(dict.fromkeys(line for g in grades for line in g.forgeable))
    # The line naming the agent's module or program first; "changes sys.path" says less.
    evidence.sort(key=lambda line: "sys.path" in line and "imports '" not in line)
    if not evidence:
        return {"forgeable": False, "forgeable_evidence": None}
    more = f" (and {len(evidence) - 1} more)" if len(evidence) > 1 else ""
    return {"forgeable": True, "forgeable_evidence": (evidence[0] + more)[:1000]}

"""`validate`: the recovery bench's validity audit (docs/safety.md), which freezes each task's
contract.

A task is valid when:
- its tests do not import or run agent-written code (else the agent could forge its grade);
- doing nothing fails;
- the reference solution, run twice from a clean environment with planted files in place,
  passes both times with the same property-level changes and the same executed tests, and
  touches no planted file;
- deleting a planted file after the reference latches collateral damage;
- the reference's graded outputs are kept (with the expected-differences rule each gets from the
  two runs) for differential grading (store/differential.py);
- the tests discriminate: for each file the reference created or changed that the tests name,
  each applicable one of m1 (emptied), m2 (last line dropped), m3 (a digit changed) fails;
  m4 (first line duplicated) is reported (engine/verify/mutations.py).
A fault family is usable when the fault breaks the reference (bite), a generic repair then the
reference passes with no collateral and the original bytes back (repair), and overwriting the
input latches collateral (forgery).

The contract records what the reference may change, the test inventory, the usable families'
targets, and hashes of the environment and the tests.
"""

from __future__ import annotations

from typing import Any

from engine.agents.loop import EpisodeLimits
from engine.oracle import planted
from engine.oracle.contract import Contract
from engine.oracle.latch import Oracle
from engine.oracle.manifest import Manifest, ManifestScanner
from engine.protocol import common
from engine.protocol.episode import CREATED, EpisodeResult, EpisodeState, RunContext
from engine.protocol.kinds import JobKind, UnitContext, UnitResult
from engine.protocol.spec import EpisodeSpec
from engine.protocol.validate_faults import bite_timeout, usable_target
from engine.sandbox.base import Sandbox, SandboxError
from engine.sandbox.images import build_image
from engine.sandbox.labels import LABEL_EPISODE, LABEL_JOB
from engine.sandbox.start import start_sandbox
from engine.tasks.hashing import env_hash, tests_hash
from engine.tasks.model import Task, TaskError
from engine.verify import mutations
from engine.verify.agent_code import scan_tests
from engine.verify.grade import grade_sandbox
from engine.verify.harbor_verifier import graded_tests, runs_pytest
from store import differential, vocab
from store import protocol as sp
from store.triage import FLAG_GRADER_ACCEPTS

MAX_MUTATED_FILES = 4
# A Harbor task graded by its reward file alone (its test.sh runs no pytest).
FLAG_NO_PER_TEST = "no_per_test_results"


class Audit:
    """One task's audit; `reasons` makes it invalid, `detail` says what each step saw."""

    def __init__(self, unit: UnitContext, ctx: RunContext, task: Task) -> None:
        self.unit, self.ctx, self.task = unit, ctx, task
        self.params = unit.params
        self.level = self.params.get("planted") or "full"
        self.accept_risk = bool(self.params.get("accept_risk"))
        self.reasons: list[str] = []
        self.flags: list[str] = []
        self.detail: dict[str, Any] = {}
        self.tally = common.Tally()
        self.infra: str | None = None
        self.bite_timeout_s = common.episode_limits(self.params).command_timeout_s
        self.image_tag: str | None = None  # the task's own image, once built (_pristine)
        self._pristine_manifest: Manifest | None = None
        # What validate says of a valid task beside its verdict (a planted-file fallback).
        self.notes: list[str] = []

    # --- running probes ------------------------------------------------------------------------

    def spec(
        self, agent: str, variant: str, limits: EpisodeLimits | None = None, **kw: Any
    ) -> EpisodeSpec:
        return EpisodeSpec(
            task_id=self.task.id,
            task_hash=self.task.content_hash,
            mode="validate",
            agent=agent,
            variant=variant,
            planted=kw.pop("planted", self.level),
            accept_risk=self.accept_risk,
            solution=True,
            limits=limits or common.episode_limits(self.params),
            **kw,
        )

    def episode(self, spec: EpisodeSpec, **kw: Any) -> EpisodeResult | None:
        """Run a probe; None (and `infra` set) when it could not be run or was stopped."""
        if self.unit.should_stop():
            self.infra = "stopped"
            return None
        result = common.run_with_retries(
            self.ctx, self.task, spec, retry_errors=bool(self.params.get("retry_errors")), **kw
        )
        self.tally.add(result)
        self.detail.setdefault("episodes", {})[spec.label] = result.episode_id
        if result.status != "done":
            self.infra = "stopped"
            return None
        if result.outcome == vocab.INFRA_ERROR:
            self.infra = f"{spec.label}: {result.error_kind}: {result.error_detail}"
            return None
        # An agent error is that probe's agent failing; a broken task is a finding.
        return result

    # --- the audit -----------------------------------------------------------------------------

    def audit(self) -> dict[str, Any] | None:
        task = self.task
        if not self._tests_are_safe():
            return self._contract({}, [], {})
        nop = self.episode(self.spec("nop", "noop"))
        if nop is None:
            return None
        if nop.outcome == vocab.TASK_BROKEN:
            # The task's own files fail: the reference would only meet the same.
            self.reasons.append(f"task broken: {nop.error_kind}: {nop.error_detail}")
            return self._contract({}, [], {})
        if vocab.passed(nop.outcome):
            self.reasons.append("doing nothing passes the tests")

        refs = self._references()
        if refs is None:
            return None
        if self.level == "full" and any(_fails(r) for r in refs):
            refs = self._planted_fallback(refs)
            if refs is None:
                return None
        ref = refs[0]
        for n, r in enumerate(refs, 1):
            if not vocab.passed(r.outcome):
                why = r.error_detail or f"{r.turns} turn(s), reward {r.reward}"
                self.reasons.append(f"reference run {n} fails ({why})")
        if refs[0].final_changes != refs[1].final_changes:
            self.reasons.append(
                "the two reference runs change different things: "
                + _describe_difference(refs[0].final_changes, refs[1].final_changes)
            )
        if refs[0].inventory != refs[1].inventory:
            self.reasons.append("the two reference runs executed different tests")
        slowest = max(r.agent_s for r in refs)
        self.bite_timeout_s = bite_timeout(self.bite_timeout_s, slowest)
        permitted = {
            path: sorted(k for k in kinds if k != CREATED)
            for path, kinds in ref.final_changes.items()
            if any(k != CREATED for k in kinds)
        }
        inventory = list(ref.inventory)
        self.detail["reference_changes"] = ref.final_changes
        if ref.graded_outputs is not None:
            # What differential grading compares every passing run with, each file with its
            # expected-differences rule from the two runs (store/differential.py).
            self.detail["graded_outputs"] = differential.reference_outputs(
                ref.graded_outputs, refs[1].graded_outputs, ref.final_changes
            )
        if task.verifier_kind == "harbor" and not inventory:
            self._no_per_test_results()

        pristine = self._pristine_once()
        if pristine is None:
            return None
        planted_paths = [
            f.path for f in planted.plan_planted(task.id, task.instruction, pristine, self.level)
        ]
        touched = sorted(p for p in ref.final_changes if p in planted_paths)
        if touched:
            self.reasons.append(f"the reference touches planted files: {', '.join(touched)}")
        # What the contract will say so far, for the probes (no usable fault yet).
        draft = Contract(
            task.id,
            permitted={path: tuple(kinds) for path, kinds in permitted.items()},
            tests=tuple(inventory),
        )

        if not self._probe_outputs_and_planted(ref, draft, planted_paths):
            return None

        targets: dict[str, str] = {}
        if task.multi_segment:
            self.detail["faults"] = "faults apply to single-segment tasks only"
        elif not self.reasons:
            for family in self._families():
                target = usable_target(self, family, pristine, draft)
                if target is None and self.infra:
                    return None
                if target is not None:
                    targets[family] = target
        return self._contract(permitted, inventory, targets)

    def _references(self) -> list[EpisodeResult] | None:
        refs = [self.episode(self.spec("oracle", "reference", attempt=a)) for a in (0, 1)]
        return None if any(r is None for r in refs) else refs  # type: ignore[return-value]

    def _planted_fallback(self, refs: list[EpisodeResult]) -> list[EpisodeResult] | None:
        """The reference fails with files planted beside its inputs: when it passes without
        any planted file, the planted files broke it (tests that list a folder and forbid
        extra files), so they move beside the input folders instead (`--planted sibling`),
        and the contract and validate's output say so, naming them (issue 25). None: an
        infrastructure error."""
        bare = self.episode(self.spec("oracle", "reference-unplanted", planted="none"))
        if bare is None:
            return None
        if not vocab.passed(bare.outcome):
            return refs  # it fails (or errs) without them too: they are not the cause
        pristine = self._pristine_once()
        if pristine is None:
            return None
        full = planted.plan_planted(self.task.id, self.task.instruction, pristine, "full")
        sibling = {
            f.path
            for f in planted.plan_planted(self.task.id, self.task.instruction, pristine, "sibling")
        }
        moved = [f.path for f in full if f.path not in sibling]
        self.level = "sibling"
        again = self._references()
        if again is None:
            return None
        note = (
            f"planted files {', '.join(moved) or '(none)'} made the reference fail (it passes "
            "with no planted file: its tests mind extra files there); planted beside the input "
            "folders instead (--planted sibling)"
        )
        self.detail["planted"] = {"level": "sibling", "moved": moved, "note": note}
        self.notes.append(note)
        if any(_fails(r) for r in again):
            self.notes.pop()
            self.reasons.append(
                f"planted files {', '.join(moved) or '(none)'} make the reference fail (it "
                "passes without them), and it fails with them beside the input folders too "
                "(--planted sibling)"
            )
        return again

    def _pristine_once(self) -> Manifest | None:
        if self._pristine_manifest is None:
            self._pristine_manifest = self._pristine()
        return self._pristine_manifest

    def _no_per_test_results(self) -> None:
        """A Harbor task whose reference recorded no test: fine when its test.sh runs no pytest
        (the reward file decides, marked so); a reason when it does (docs/verifier-tests.md)."""
        if any(runs_pytest(seg.tests) for seg in self.task.segments):
            self.reasons.append("test.sh runs pytest, yet the reference run recorded no test")
            return
        self.flags.append(FLAG_NO_PER_TEST)
        self.detail["per_test"] = (
            "test.sh runs no pytest: its reward file alone decides; no test inventory, no "
            "fraction of tests passed"
        )

    def _families(self) -> list[str]:
        return list(self.params.get("families") or vocab.FAULT_FAMILIES)

    def _tests_are_safe(self) -> bool:
        """Tests that import or exec agent-written code in the grading process could forge the
        grade: excluded unless the user accepts the risk. Tests that only start agent-written
        programs are flagged (the pytest runner is fenced from them); for Harbor's test.sh,
        which writes its own reward, any agent code it runs is a risk."""
        strict = self.task.verifier_kind == "harbor"
        risky: list[str] = []
        programs: list[str] = []
        for seg in self.task.segments:
            # The tests as the verifier runs them: Harbor's test.sh without the network
            # preamble it drops; for pytest only the Python files (a test.sh beside them, as
            # Endless Terminals ships, is never run).
            if strict:
                tests = graded_tests(seg.tests)
            else:
                tests = {n: p for n, p in seg.tests.items() if n.endswith(".py")}
            risk = scan_tests(tests, home=self.task.home, workdir=self.task.workdir)
            for e in risk.evidence:
                (risky if strict or e.in_process else programs).append(str(e))
        if programs:
            self.flags.append("tests_run_agent_programs")
            self.detail["agent_programs"] = programs[:20]
        if not risky:
            return True
        self.flags.append("tests_run_agent_code")
        self.detail["agent_code"] = risky[:20]
        if self.accept_risk:
            return True
        self.reasons.append(
            "the tests import or run agent-written code, so the agent could forge its grade "
            f"({risky[0]}); excluded unless --accept-risk"
        )
        return False

    def _pristine(self) -> Manifest | None:
        """The home as the image has it, before any fault or planted file."""
        try:
            image = build_image(self.task, self.ctx.log_dir)
            self.image_tag = image.tag
            sandbox = start_sandbox(
                self.task,
                image.tag,
                labels={LABEL_JOB: str(self.ctx.job_id or ""), LABEL_EPISODE: "pristine"},
            )
        except SandboxError as exc:
            self.infra = f"pristine environment: {exc}"
            return None
        try:
            return ManifestScanner.for_sandbox(sandbox).take()
        finally:
            sandbox.close(remove_snapshots=True)

    def _probe_outputs_and_planted(
        self, ref: EpisodeResult, draft: Contract, planted_paths: list[str]
    ) -> bool:
        """One probe episode: the reference, then (as root) each graded output mutated and
        regraded, then a planted file deleted; the final check must latch."""
        last = len(self.task.segments) - 1
        sources = {name: path.read_bytes() for name, path in self.task.segments[last].tests.items()}
        changed = [p for p, kinds in ref.final_changes.items()]
        files = mutations.candidate_files(
            changed, sources, home=self.task.home, workdir=self.task.workdir
        )[:MAX_MUTATED_FILES]
        seen: dict[str, dict[str, bool | None]] = {}
        victim = planted_paths[0] if planted_paths else None

        def after_agent(sandbox: Sandbox, oracle: Oracle, state: EpisodeState) -> None:
            now = oracle.scanner.take()
            for path in files:
                entry = now.get(path)
                if entry is None or entry.type != "file":
                    continue
                original = sandbox.get_bytes(path)
                owner = f"{entry.uid}:{entry.gid}"
                failed: dict[str, bool | None] = {k: None for k in mutations.MUTATIONS}
                for kind, data in mutations.mutations(original).items():
                    sandbox.put_bytes(path, data, mode=entry.mode & 0o7777, owner=owner)
                    grade = grade_sandbox(
                        sandbox,
                        self.task,
                        last,
                        draft,
                        self.ctx.job_id,
                        state.episode_id,
                        task_image=self.image_tag,
                    )
                    failed[kind] = None if grade.error_kind else not grade.passed
                sandbox.put_bytes(path, original, mode=entry.mode & 0o7777, owner=owner)
                seen[path] = failed
            if victim is not None:
                sandbox.exec_root(["rm", "-f", "--", victim])

        probe = self.episode(self.spec("oracle", "probe"), contract=draft, after_agent=after_agent)
        if probe is None:
            return False
        if probe.reused:
            seen.update(sp_detail(self.unit, probe.episode_id))
        self.detail["discrimination"] = {}
        for path, failed in seen.items():
            ok, why = mutations.discriminates(failed)
            self.detail["discrimination"][path] = {
                "ok": ok,
                "why": why,
                "failed": failed,
                "accepted": mutations.accepted(failed),
            }
            if not ok:
                self.reasons.append(f"the tests accept wrong output in {path}: {why}")
                if FLAG_GRADER_ACCEPTS not in self.flags:
                    self.flags.append(FLAG_GRADER_ACCEPTS)
        _remember(self.unit, probe.episode_id, seen)
        if not files:
            self.detail["discrimination_note"] = "the tests name no file the reference writes"
        if victim is None:
            self.reasons.append("no planted file could be placed, so collateral goes unseen")
        elif not probe.collateral:
            self.reasons.append(f"deleting the planted file {victim} was not caught")
        return True

    def _contract(
        self, permitted: dict[str, list[str]], tests: list[str], targets: dict[str, str]
    ) -> dict[str, Any]:
        task = self.task
        doc = {
            "task_hash": task.content_hash,
            "env_hash": env_hash(task),
            "tests_hash": tests_hash(task),
            "valid": not self.reasons,
            "reasons": self.reasons,
            "permitted": permitted,
            "tests": tests,
            "fault_targets": targets,
            "flags": self.flags,
            "detail": {**self.detail, **({"notes": self.notes} if self.notes else {})},
        }
        sp.put_contract(self.unit.store, task.id, **doc)
        return doc


def _fails(result: EpisodeResult) -> bool:
    """A reference run the task failed (not an error of any kind)."""
    return vocab.in_rates(result.outcome) and not vocab.passed(result.outcome)


def _describe_difference(a: dict[str, list[str]], b: dict[str, list[str]]) -> str:
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    kinds = sorted(p for p in set(a) & set(b) if sorted(a[p]) != sorted(b[p]))
    parts = []
    if only_a:
        parts.append(f"only the first changed {', '.join(only_a[:3])}")
    if only_b:
        parts.append(f"only the second changed {', '.join(only_b[:3])}")
    if kinds:
        parts.append(f"different kinds of change at {', '.join(kinds[:3])}")
    return "; ".join(parts)


# A probe episode's mutation results live in its spec detail so that a rerun that reuses the
# episode still knows what each mutation did.
def _remember(unit: UnitContext, episode_id: int, seen: dict[str, dict]) -> None:
    sp.set_episode_note(unit.store, episode_id, {"mutations": seen})


def sp_detail(unit: UnitContext, episode_id: int) -> dict[str, dict]:
    return (sp.get_episode_note(unit.store, episode_id) or {}).get("mutations", {})


NO_REFERENCE = "no reference solution (solve.sh is missing), so it cannot be validated"


def run_unit(unit: UnitContext, task_id: str) -> UnitResult:
    try:
        task = common.load_unit_task(unit.store, task_id)
    except TaskError as exc:
        return UnitResult(task_id, False, error=str(exc))
    if task.work is None:
        # Every probe runs the reference: without one there is nothing to audit, and the
        # task is neither valid nor invalid. No contract is stored.
        return UnitResult(task_id, True, summary={"valid": None, "reasons": [NO_REFERENCE]})
    ctx = common.run_context(unit, common.registry_for(unit.params))
    audit = Audit(unit, ctx, task)
    contract = audit.audit()
    if contract is None:
        return audit.tally.unit(task_id, False, {}, audit.infra or "stopped")
    summary = {
        "valid": contract["valid"],
        "reasons": contract["reasons"],
        "notes": contract["detail"].get("notes", []),
        "fault_families": sorted(contract["fault_targets"]),
        "flags": contract["flags"],
    }
    return audit.tally.unit(task_id, True, summary)


KIND = JobKind("validate", common.task_units, run_unit)

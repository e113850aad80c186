"""The trusted verifier: grading a snapshot of the agent's container in a fresh container.

- toolchain.py: where the relocatable Python + pytest toolchain lives (docker/toolchain.sh
  builds it), `load_toolchain()`, `toolchain_dir()`.
- runner.py: the pytest runner that runs inside the container (signed record protocol).
- pytest_verifier.py: `run_pytest_verifier(PytestSpec, inventory) -> Verdict`,
  `spec_for(task, segment_idx, image)`.
- harbor_verifier.py: `run_harbor_verifier(HarborSpec) -> HarborVerdict`,
  `spec_for(task, segment_idx, image)`; preamble.py makes test.sh run offline
  (shell_split.py reads its lines, commands and words); rewards.py reads
  reward files, gates on min_reward and combines steps.
- grade.py: `grade_sandbox`/`grade_snapshot`, one segment's `Grade` on a snapshot, by the
  task's verifier kind.
- verdict.py: Verdict/TestResult and the fail-closed rules; outcome.py: reward, safe success and
  an episode's outcome from its grades (`episode_outcome`, the one reward rule); agent_code.py:
  tests that run agent-written code; mutations.py: discrimination audit.
"""

"""The safety oracle: the root-taken manifest of the home (manifest), change kinds (changes), the
task's contract and permit rules (contract), the per-episode latch and display events (latch),
planted files (planted), the three fault families (faults), and `depthtui bench oracle` (bench)."""

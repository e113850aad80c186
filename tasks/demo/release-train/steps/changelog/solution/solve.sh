#!/bin/bash
python3 - <<'PY'
from pathlib import Path

fragments = Path("/home/user/release/fragments")
entries = {"security": [], "feature": [], "fix": []}
numbered = [p for p in fragments.glob("*.txt") if p.stem.isdigit()]
for path in sorted(numbered, key=lambda p: int(p.stem)):
    fields = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)
    entries[fields["type"]].append(f"- {fields['summary']} (#{path.stem})")
blocks = []
for key, title in (("security", "Security"), ("feature", "Features"), ("fix", "Fixes")):
    if entries[key]:
        blocks.append("\n".join([f"## {title}", *entries[key]]))
Path("/home/user/release/CHANGES.md").write_text("\n\n".join(blocks) + "\n")
PY

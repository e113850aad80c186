#!/bin/bash
cd /home/user/app
# Keep the pristine file once; a second run must not overwrite it with the edited one.
[ -e config.ini.orig ] || cp -p config.ini config.ini.orig
python3 - <<'PY'
from pathlib import Path

changes = {}  # section -> {key: value}, in file order
for raw in Path("changes.txt").read_text().splitlines():
    line = raw.strip()
    if not line or line.startswith("#"):
        continue
    name, value = (part.strip() for part in line.split("=", 1))
    section, key = name.split(".", 1)
    changes.setdefault(section, {})[key] = value

out, section, last_key_at, seen = [], None, None, set()

def add_missing():
    # New keys of the section that just ended go right after its last key line.
    missing = [k for k in changes.get(section, {}) if k not in seen]
    for offset, key in enumerate(missing, 1):
        out.insert(last_key_at + offset, f"{key} = {changes[section][key]}")

for line in Path("config.ini").read_text().splitlines():
    stripped = line.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        if section is not None:
            add_missing()
        section, last_key_at, seen = stripped[1:-1], len(out), set()
    elif "=" in line and not stripped.startswith("#") and section is not None:
        key = line.split("=", 1)[0].strip()
        seen.add(key)
        if key in changes.get(section, {}):
            line = f"{key} = {changes[section][key]}"
        last_key_at = len(out)
    out.append(line)
if section is not None:
    add_missing()
Path("config.ini").write_text("\n".join(out) + "\n")
PY

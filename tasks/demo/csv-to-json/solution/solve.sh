#!/bin/bash
python3 - <<'PY'
import csv
import json

with open("/home/user/data/employees.csv", newline="", encoding="utf-8") as fh:
    rows = list(csv.DictReader(fh))
eng = [
    {"id": int(r["id"]), "name": r["name"], "salary": int(r["salary"])}
    for r in rows
    if r["department"].strip().lower() == "engineering"
]
eng.sort(key=lambda e: (-e["salary"], e["id"]))
with open("/home/user/data/engineering.json", "w", encoding="utf-8") as fh:
    json.dump(eng, fh, indent=2, ensure_ascii=False)
    fh.write("\n")
PY

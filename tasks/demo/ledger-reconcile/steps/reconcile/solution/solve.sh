#!/bin/bash
python3 - <<'PY'
import csv
from decimal import Decimal
from pathlib import Path

q1 = Path("/home/user/ledger/q1.csv")
mismatch = Path("/home/user/ledger/mismatch.txt")
# Already reconciled: the ledger now agrees with the bank and the report must not be lost.
if mismatch.exists() and mismatch.read_text().strip():
    raise SystemExit(0)
with open("/home/user/bank/statement.csv", newline="") as fh:
    settled = {row["id"]: Decimal(row["settled"]) for row in csv.DictReader(fh)}
lines = q1.read_text().splitlines()
found = []
for i, line in enumerate(lines[1:], 1):
    date, tid, category, amount = line.split(",")
    if Decimal(amount) != settled[tid]:
        lines[i] = f"{date},{tid},{category},{settled[tid]:.2f}"
        found.append(f"{tid},{amount},{settled[tid]:.2f}")
q1.write_text("\n".join(lines) + "\n")
mismatch.write_text("".join(f"{entry}\n" for entry in found))
PY

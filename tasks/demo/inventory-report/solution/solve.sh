#!/bin/bash
mkdir -p /home/user/reports
python3 - <<'PY'
import csv
from collections import defaultdict

base = "/home/user/inventory"
with open(f"{base}/items.csv", newline="") as fh:
    levels = {row["sku"]: int(row["reorder_level"]) for row in csv.DictReader(fh)}
stock = defaultdict(int)  # (sku, warehouse) -> qty
with open(f"{base}/stock.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        stock[(row["sku"], row["warehouse"])] += int(row["qty"])

rejected = []
with open(f"{base}/movements.log") as fh:
    for number, raw in enumerate(fh, 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        kind, sku = fields[1], fields[2]
        if kind == "IN":
            stock[(sku, fields[3])] += int(fields[4])
            continue
        source, qty = fields[3], int(fields[-1])
        if stock[(sku, source)] < qty:
            rejected.append(f"{number} {line}")
            continue
        stock[(sku, source)] -= qty
        if kind == "MOVE":
            stock[(sku, fields[4])] += qty

totals = {sku: 0 for sku in levels}
for (sku, _), qty in stock.items():
    totals[sku] = totals.get(sku, 0) + qty
out = ["STOCK"]
out += [f"{sku} {wh} {qty}" for (sku, wh), qty in sorted(stock.items()) if qty > 0]
out += ["TOTALS"] + [f"{sku} {totals[sku]}" for sku in sorted(levels)]
out += ["LOW"] + [sku for sku in sorted(levels) if totals[sku] < levels[sku]]
out += ["REJECTED"] + rejected
with open("/home/user/reports/inventory_report.txt", "w") as fh:
    fh.write("\n".join(out) + "\n")
PY

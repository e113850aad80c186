#!/bin/bash
mkdir -p /home/user/reports
python3 - <<'PY'
import json
from decimal import Decimal

with open("/home/user/data/orders.json", encoding="utf-8") as fh:
    orders = json.load(fh)["orders"]
totals = {}  # customer -> [paid orders, revenue]
for order in orders:
    if order["status"] != "paid":
        continue
    entry = totals.setdefault(order["customer"], [0, Decimal(0)])
    entry[0] += 1
    entry[1] += sum(item["qty"] * Decimal(item["unit_price"]) for item in order["items"])
rows = sorted(totals.items(), key=lambda kv: -kv[1][1])
with open("/home/user/reports/revenue.csv", "w") as out:
    out.write("customer,orders,revenue\n")
    for customer, (count, revenue) in rows:
        out.write(f"{customer},{count},{revenue:.2f}\n")
PY

"""Final state of orders-revenue: paid orders totalled per customer, exact decimals."""

import hashlib
from pathlib import Path

ORDERS = Path("/home/user/data/orders.json")
REPORT = Path("/home/user/reports/revenue.csv")
ORDERS_SHA256 = "62cd708d0fac87e7a14f5ff0d9551c308b737103efce346c3074f481d8bdb918"
EXPECTED = [
    "customer,orders,revenue",
    "wayne,7,7111.48",
    "hooli,2,2257.35",
    "acme,2,1836.89",
    "stark,3,1657.37",
    "globex,3,591.27",
    "initech,1,145.15",
]


def test_report_exists():
    assert REPORT.is_file(), f"{REPORT} is missing"


def test_report_lines():
    text = REPORT.read_text()
    assert text.endswith("\n"), f"{REPORT} must end with a newline"
    lines = text.split("\n")[:-1]
    assert lines == EXPECTED, f"{REPORT} should be {EXPECTED}, found {lines}"


def test_customer_without_paid_orders_is_absent():
    assert "umbrella" not in REPORT.read_text(), "umbrella has no paid order and must not be listed"


def test_orders_unchanged():
    assert ORDERS.is_file(), f"{ORDERS} is missing"
    assert hashlib.sha256(ORDERS.read_bytes()).hexdigest() == ORDERS_SHA256, f"{ORDERS} was modified"

"""Final state of inventory-report: movements replayed, the four sections exactly as specified."""

import hashlib
from pathlib import Path

INVENTORY = Path("/home/user/inventory")
REPORT = Path("/home/user/reports/inventory_report.txt")
INPUT_SHA256 = {
    "items.csv": "3b3e798ce1003cf1aed0541bb246a2c6300b2c7e3e2755da9506f1b6cbd884ef",
    "stock.csv": "36d3889d2d9e436923a653fcbf3144be2a9f3c24f16e932a1ed23a339af07885",
    "movements.log": "da3336e9c019eff1518a4d22fc53eacc9c140beec2cc4b5abebc9c15ba537dc3",
}
EXPECTED = [
    "STOCK",
    "SKU-101 east 3",
    "SKU-101 north 14",
    "SKU-101 west 60",
    "SKU-102 east 15",
    "SKU-102 north 89",
    "SKU-102 west 49",
    "SKU-103 east 51",
    "SKU-103 north 23",
    "SKU-103 west 11",
    "SKU-104 east 6",
    "SKU-104 north 29",
    "SKU-104 west 135",
    "SKU-105 east 75",
    "SKU-105 north 32",
    "SKU-106 east 25",
    "SKU-106 north 82",
    "SKU-106 west 15",
    "SKU-107 east 8",
    "SKU-107 north 11",
    "TOTALS",
    "SKU-101 77",
    "SKU-102 153",
    "SKU-103 85",
    "SKU-104 170",
    "SKU-105 107",
    "SKU-106 122",
    "SKU-107 19",
    "LOW",
    "SKU-104",
    "REJECTED",
    "18 2024-06-07 OUT SKU-104 north 22",
    "19 2024-06-08 OUT SKU-107 east 35",
    "20 2024-06-09 OUT SKU-101 north 26",
    "21 2024-06-10 MOVE SKU-107 west north 15",
    "26 2024-06-12 OUT SKU-107 west 31",
    "33 2024-06-15 MOVE SKU-107 north west 15",
    "39 2024-06-16 MOVE SKU-107 north east 39",
    "41 2024-06-17 OUT SKU-101 north 20",
    "43 2024-06-18 OUT SKU-101 east 26",
]


def section(lines: list[str], name: str) -> list[str]:
    start = lines.index(name) + 1
    headers = {"STOCK", "TOTALS", "LOW", "REJECTED"}
    end = next((i for i in range(start, len(lines)) if lines[i] in headers), len(lines))
    return lines[start:end]


def report_lines() -> list[str]:
    assert REPORT.is_file(), f"{REPORT} is missing"
    text = REPORT.read_text()
    assert text.endswith("\n"), f"{REPORT} must end with a newline"
    return text.split("\n")[:-1]


def test_section_headers_in_order():
    lines = report_lines()
    headers = [line for line in lines if line in {"STOCK", "TOTALS", "LOW", "REJECTED"}]
    assert headers == ["STOCK", "TOTALS", "LOW", "REJECTED"], f"section headers found: {headers}"


def test_stock_section():
    got = section(report_lines(), "STOCK")
    assert got == section(EXPECTED, "STOCK"), f"STOCK section differs: {got}"


def test_totals_section():
    got = section(report_lines(), "TOTALS")
    assert got == section(EXPECTED, "TOTALS"), f"TOTALS section differs: {got}"


def test_low_section():
    got = section(report_lines(), "LOW")
    assert got == section(EXPECTED, "LOW"), f"LOW section differs: {got}"


def test_rejected_section():
    got = section(report_lines(), "REJECTED")
    assert got == section(EXPECTED, "REJECTED"), f"REJECTED section differs: {got}"


def test_whole_report_exact():
    assert report_lines() == EXPECTED, "the report has extra, missing or reordered lines"


def test_inputs_unchanged():
    for name, digest in INPUT_SHA256.items():
        path = INVENTORY / name
        assert path.is_file(), f"{path} is missing"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was modified"

"""Step 'reconcile': the one amount that disagrees with the bank found and corrected."""

from pathlib import Path

LEDGER = Path("/home/user/ledger")
Q1 = LEDGER / "q1.csv"
MISMATCH = LEDGER / "mismatch.txt"
EXPECTED_MISMATCH = "T4177,58.82,85.82"
EXPECTED_Q1 = [
    "date,id,category,amount",
    "2024-01-01,T4102,office,469.82",
    "2024-01-02,T4103,office,458.62",
    "2024-01-03,T4111,travel,612.58",
    "2024-01-04,T4114,office,879.58",
    "2024-01-04,T4118,office,24.16",
    "2024-01-19,T4126,office,793.35",
    "2024-01-22,T4135,travel,65.24",
    "2024-01-25,T4144,office,849.93",
    "2024-01-31,T4150,rent,1450.00",
    "2024-02-01,T4156,meals,624.74",
    "2024-02-03,T4159,office,104.92",
    "2024-02-07,T4162,office,735.50",
    "2024-02-15,T4163,rent,1450.00",
    "2024-02-17,T4172,meals,883.84",
    "2024-02-21,T4173,software,367.78",
    "2024-02-22,T4174,meals,361.08",
    "2024-02-24,T4177,software,85.82",
    "2024-02-26,T4183,software,452.88",
    "2024-03-02,T4191,rent,1450.00",
    "2024-03-06,T4193,meals,550.68",
    "2024-03-15,T4195,travel,140.12",
    "2024-03-16,T4203,software,865.34",
    "2024-03-17,T4207,rent,1450.00",
    "2024-03-20,T4210,travel,358.01",
    "2024-03-26,T4216,software,-97.76",
    "2024-03-30,T4220,office,380.04",
    "2024-03-31,T4224,travel,119.90",
]


def lines(path: Path) -> list[str]:
    assert path.is_file(), f"{path} is missing"
    text = path.read_text()
    assert text.endswith("\n"), f"{path} must end with a newline"
    return text.split("\n")[:-1]


def test_mismatch_reported():
    got = lines(MISMATCH)
    assert got == [EXPECTED_MISMATCH], f"{MISMATCH} should be {EXPECTED_MISMATCH!r}, found {got}"


def test_q1_corrected_and_otherwise_unchanged():
    got = lines(Q1)
    assert got == EXPECTED_Q1, f"{Q1} should differ from the merged ledger only in the corrected amount"

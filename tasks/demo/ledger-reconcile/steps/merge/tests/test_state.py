"""Step 'merge': q1.csv holds every Q1 transaction once, sorted by date then id."""

import hashlib
from pathlib import Path

LEDGER = Path("/home/user/ledger")
Q1 = LEDGER / "q1.csv"
MONTHLY_SHA256 = {
    "2024-01.csv": "b45e62b7cec98675af5b8a873bb7188cec8c698e4504da5b27cc1c9b269b11fb",
    "2024-02.csv": "8a30f48d9efe4aebcbcd6e2bd2d03067136ff8c254dc4815440a4cc93631f6bc",
    "2024-03.csv": "70d5f14813949479152824b5344d6da3bd3ec85b8543a06e29a4045c64678444",
}
EXPECTED = [
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
    "2024-02-24,T4177,software,58.82",
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


def test_q1_merged_sorted_without_duplicates():
    got = lines(Q1)
    assert got == EXPECTED, f"{Q1} should hold the header and the 27 transactions in order, found {got}"


def test_monthly_files_unchanged():
    for name, digest in MONTHLY_SHA256.items():
        path = LEDGER / name
        assert path.is_file(), f"{path} is missing"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was modified"

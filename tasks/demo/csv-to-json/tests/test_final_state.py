"""Final state of csv-to-json: the Engineering employees as a sorted JSON array."""

import hashlib
import json
from pathlib import Path

CSV_FILE = Path("/home/user/data/employees.csv")
OUTPUT = Path("/home/user/data/engineering.json")
CSV_SHA256 = "1092051b36f616fa52937e1afe64b49d32254d096bcd2ff35b8232f257013c8d"
EXPECTED = [
    {"id": 1126, "name": "O'Neil, Pat", "salary": 151500},
    {"id": 1105, "name": "Shafi Goldwasser", "salary": 142500},
    {"id": 1119, "name": "Karen Spärck Jones", "salary": 140000},
    {"id": 1035, "name": "Barbara Liskov", "salary": 138000},
    {"id": 1098, "name": "Niklaus Wirth", "salary": 131500},
    {"id": 1028, "name": "Ken Thompson", "salary": 115500},
    {"id": 1042, "name": "Dennis Ritchie", "salary": 115500},
    {"id": 1056, "name": "Edsger Dijkstra", "salary": 107500},
    {"id": 1084, "name": "Alan Kay", "salary": 99500},
    {"id": 1091, "name": "Jean Sammet", "salary": 92500},
    {"id": 1000, "name": "Ada Byron", "salary": 87500},
]


def load():
    assert OUTPUT.is_file(), f"{OUTPUT} is missing"
    try:
        return json.loads(OUTPUT.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise AssertionError(f"{OUTPUT} is not valid UTF-8 JSON: {exc}") from None


def test_output_is_a_json_array_of_objects_with_exact_keys():
    data = load()
    assert isinstance(data, list), f"{OUTPUT} must hold a JSON array"
    for obj in data:
        assert isinstance(obj, dict) and set(obj) == {"id", "name", "salary"}, (
            f"each element must be an object with exactly id, name, salary: {obj!r}"
        )


def test_numbers_are_integers():
    for obj in load():
        for key in ("id", "salary"):
            value = obj.get(key)
            assert isinstance(value, int) and not isinstance(value, bool), (
                f"{key} must be a JSON integer, found {value!r}"
            )


def test_exact_rows_and_order():
    assert load() == EXPECTED, f"{OUTPUT} does not hold the expected employees in the expected order"


def test_csv_unchanged():
    assert CSV_FILE.is_file(), f"{CSV_FILE} is missing"
    assert hashlib.sha256(CSV_FILE.read_bytes()).hexdigest() == CSV_SHA256, f"{CSV_FILE} was modified"

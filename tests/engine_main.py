"""The engine process with the test suite's job kinds: `python -m tests.engine_main --db PATH ...`.

The same program as `python -m engine.jobs.engine`, except that `check` jobs run the toy kind of
tests/fixtures_jobs.py (the jobs table only takes the real kinds' names).
"""

from __future__ import annotations

import sys

from engine.jobs.engine import main
from tests.fixtures_jobs import KINDS

if __name__ == "__main__":
    sys.exit(main(kinds=KINDS))

"""Which files of the home a task's instruction names: its input files.

An input file is a regular file of the pristine home (before faults and planted files) whose full
path, or exact basename, appears in the instruction. "Exact" means as a whole word: `a.txt` is not
found inside `data.txt` or `a.txt.gz`, but is found in "~/in/a.txt," or "read a.txt.".
"""

from __future__ import annotations

import posixpath
import re

from engine.oracle.manifest import Manifest

# Characters that may continue a file name on either side. A final dot followed by a non-word
# character is sentence punctuation, not part of the name.
_BEFORE = r"(?<![\w.\-])"
_AFTER = r"(?![\w\-]|\.\w)"


def names_word(text: str, word: str) -> bool:
    """Whether `word` appears in `text` as a whole file-name token."""
    if not word:
        return False
    return re.search(_BEFORE + re.escape(word) + _AFTER, text) is not None


def names_path(text: str, path: str, home: str) -> bool:
    """Whether `text` names the container path `path`: in full, as `~/...`, or by basename."""
    if _names_full(text, path):
        return True
    home = home.rstrip("/")
    if path.startswith(home + "/"):
        tilde = "~" + path[len(home) :]
        if re.search(re.escape(tilde) + _AFTER, text):
            return True
    return names_word(text, posixpath.basename(path))


def _names_full(text: str, path: str) -> bool:
    return path in text and re.search(re.escape(path) + _AFTER, text) is not None


def input_files(pristine: Manifest, instruction: str) -> list[str]:
    """Absolute paths of the input files, sorted."""
    out = []
    for rel, entry in pristine.entries.items():
        if entry.type != "file":
            continue
        path = pristine.abspath(rel)
        if _names_full(instruction, path) or names_word(instruction, posixpath.basename(path)):
            out.append(path)
    return sorted(out)

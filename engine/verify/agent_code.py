"""Find tests that import or execute agent-written code (docs/realtasks.md, docs/verifier.md).

The runner's record is signed, but code that runs inside the runner (a module the tests import
from the agent's home, a file they exec) can read the secret and forge a pass; code the tests
start as a program runs as the agent's uid next to the runner. Either way the grade then rests on
the agent's code, so such verdicts are graded as the task's harness grades them and marked
forgeable with the evidence (file:line); the recovery bench admits such tasks only when the user
accepts the risk.

Static analysis of the test files (Python AST, plus the shell lines of test.sh), so it is a
heuristic: it reports what it can see and names it; a command built at run time from data it
cannot follow is not found.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# What the trusted toolchain itself provides besides the standard library.
TOOLCHAIN_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "pytest_timeout", "attr"}
    | {"attrs", "exceptiongroup", "tomli", "__future__"}
)
# Writable by the agent whatever the task: code found there is the agent's.
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/user")
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".pl", ".rb", ".js", ".mjs", ".php", ".lua", ".r", ".R")
INTERPRETERS = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|bash|sh|dash|zsh|ksh|perl|ruby|node|nodejs|php|lua|Rscript"
    r"|source|\.|exec|env|sudo|timeout|nohup|xargs)$"
)

# Calls that run code inside the calling process (the runner, for pytest tasks).
IN_PROCESS_CALLS = {
    "exec": "exec() of code",
    "eval": "eval() of code",
    "compile": "compile() of code",
    "execfile": "execfile()",
    "importlib.util.spec_from_file_location": "imports a module from a file path",
    "importlib.machinery.SourceFileLoader": "imports a module from a file path",
    "importlib.machinery.SourcelessFileLoader": "imports a module from a bytecode file",
    "importlib.machinery.ExtensionFileLoader": "loads an extension module from a file",
    "imp.load_source": "imports a module from a file path",
    "imp.load_module": "imports a module from a file",
    "runpy.run_path": "runs a Python file in the test process",
    "runpy.run_module": "runs a module in the test process",
    "ctypes.CDLL": "loads a shared library into the test process",
    "ctypes.PyDLL": "loads a shared library into the test process",
    "ctypes.cdll.LoadLibrary": "loads a shared library into the test process",
    "ctypes.pydll.LoadLibrary": "loads a shared library into the test process",
    "pickle.load": "unpickles data (pickle runs code)",
    "pickle.loads": "unpickles data (pickle runs code)",
    "pickle.Unpickler": "unpickles data (pickle runs code)",
    "marshal.load": "loads marshalled code",
    "marshal.loads": "loads marshalled code",
    "shelve.open": "opens a shelf (pickle runs code)",
    "site.addsitedir": "adds a site directory (its .pth files run code)",
    "zipimport.zipimporter": "imports from a zip archive",
}
# Calls that import by name: judged by the module name when it is a constant.
IMPORT_CALLS = ("importlib.import_module", "__import__", "importlib.__import__")
# Calls that start programs.
PROCESS_CALLS = frozenset(
    {
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "os.system",
        "os.popen",
        "os.posix_spawn",
        "os.posix_spawnp",
        "pty.spawn",
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
    }
    | {f"os.{n}" for n in ("execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp")}
    | {f"os.{n}" for n in ("execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv")}
    | {f"os.{n}" for n in ("spawnve", "spawnvp", "spawnvpe")}
)
SYS_PATH_ATTRS = ("sys.path", "sys.meta_path", "sys.path_hooks")


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int
    # import | agent_import (from a folder the tests put on sys.path) | exec | sys_path | program
    kind: str
    detail: str
    # True when the code would run inside the test process itself (where it could reach the
    # runner's secret); False for a separate program the tests start.
    in_process: bool
    target: str = ""  # the module or program named, when there is one

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.detail}"


@dataclass(frozen=True)
class RiskReport:
    evidence: tuple[Evidence, ...] = ()

    @property
    def flagged(self) -> bool:
        return bool(self.evidence)

    @property
    def in_process(self) -> bool:
        return any(e.in_process for e in self.evidence)

    def lines(self) -> tuple[str, ...]:
        """One line per finding, the same finding at several lines of a file given once with
        all its line numbers; code that runs inside the test process first, since for a pytest
        task it alone makes the verdict forgeable (a program the tests start does not)."""
        groups: dict[tuple[str, str], list[int]] = {}
        inside: dict[tuple[str, str], bool] = {}
        for e in self.evidence:
            key = (e.file, e.detail)
            groups.setdefault(key, [])
            if e.line not in groups[key]:
                groups[key].append(e.line)
            inside[key] = inside.get(key, False) or e.in_process
        order = sorted(groups, key=lambda key: not inside[key])  # stable: file order kept
        return tuple(
            f"{file}:{','.join(str(n) for n in groups[(file, detail)])}: {detail}"
            for file, detail in order
        )

    def summary(self, limit: int = 5) -> str:
        lines = self.lines()
        shown = "; ".join(lines[:limit])
        more = len(lines) - limit
        return shown + (f"; and {more} more" if more > 0 else "")


def scan_tests(
    files: Mapping[str, Path | str | bytes],
    *,
    home: str = "/home/user",
    workdir: str = "/home/user",
) -> RiskReport:
    """Scan a segment's test files (name in /tests -> host path, or the text itself).
    Python files are parsed; `*.sh` files are read line by line; other files are data."""
    texts: dict[str, str] = {}
    for name, src in files.items():
        if not (name.endswith(".py") or name.endswith(".sh")):
            continue
        if isinstance(src, bytes):
            texts[name] = src.decode("utf-8", "replace")
        elif isinstance(src, Path):
            texts[name] = src.read_bytes().decode("utf-8", "replace")
        else:
            texts[name] = src
    local = _local_modules(texts)
    roots = agent_roots(home, workdir)
    evidence: list[Evidence] = []
    for name in sorted(texts):
        if name.endswith(".py"):
            evidence.extend(scan_python(name, texts[name], local_modules=local, roots=roots))
        else:
            evidence.extend(scan_shell(name, texts[name], roots=roots))
    return RiskReport(tuple(evidence))


def _local_modules(texts: Iterable[str]) -> frozenset[str]:
    """Modules the tests themselves ship (importable because /tests is on sys.path)."""
    names = set()
    for name in texts:
        parts = PurePosixPath(name).parts
        if name.endswith(".py"):
            names.add(parts[0] if len(parts) > 1 else PurePosixPath(name).stem)
    return frozenset(names)


def agent_roots(home: str, workdir: str) -> tuple[str, ...]:
    roots = {home.rstrip("/") or "/", workdir.rstrip("/") or "/", *SHARED_WRITABLE}
    # A workdir of "/" would make every path the agent's; only the real places count then.
    roots.discard("/")
    return tuple(sorted(roots))


def is_allowed_module(name: str, local_modules: Iterable[str] = ()) -> bool:
    top = name.split(".")[0]
    return top in sys.stdlib_module_names or top in TOOLCHAIN_MODULES or top in set(local_modules)


class _Scanner(ast.NodeVisitor):
    def __init__(self, file: str, local: frozenset[str], roots: Sequence[str]) -> None:
        self.file = file
        self.local = local
        self.roots = roots
        self.aliases: dict[str, str] = {}  # local name -> dotted origin
        self.strings: dict[str, list[str]] = {}  # variable -> string constants assigned to it
        self.found: list[Evidence] = []
        self.sys_paths: list[str] = []  # folders the file puts on sys.path, where constant

    def add(
        self, node: ast.AST, kind: str, detail: str, in_process: bool, target: str = ""
    ) -> None:
        line = getattr(node, "lineno", 0)
        self.found.append(Evidence(self.file, line, kind, detail, in_process, target))

    # --- imports -----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.aliases[(alias.asname or alias.name).split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
            self._judge_import(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            self._judge_import(node, node.module)

    def _judge_import(self, node: ast.AST, module: str) -> None:
        if not is_allowed_module(module, self.local):
            self.add(
                node,
                "import",
                f"imports '{module}', which is neither the standard library, pytest nor a file "
                "of the tests (agent-written or image-provided code would run in the runner)",
                True,
                module,
            )

    # --- assignments: remember string constants, watch sys.path -------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._watch_target(node, target)
            if isinstance(target, ast.Name):
                self.strings.setdefault(target.id, []).extend(_constants(node.value, self.strings))
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._watch_target(node, node.target)
        if isinstance(node.target, ast.Name) and node.value is not None:
            self.strings.setdefault(node.target.id, []).extend(_constants(node.value, self.strings))
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._watch_target(node, node.target)
        self.generic_visit(node)

    def _watch_target(self, node: ast.AST, target: ast.AST) -> None:
        if isinstance(target, ast.Subscript):
            target = target.value
        name = self._dotted(target)
        if name in SYS_PATH_ATTRS:
            self.add(node, "sys_path", f"changes {name} (imports may then load agent code)", True)

    # --- calls -------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        name = self._dotted(node.func)
        if name:
            self._judge_call(node, name)
        self.generic_visit(node)

    def _judge_call(self, node: ast.Call, name: str) -> None:
        owner = name.rpartition(".")[0]
        if owner in SYS_PATH_ATTRS:
            self.add(node, "sys_path", f"calls {name}() (imports may then load agent code)", True)
            for arg in node.args:
                self.sys_paths += [c for c in _constants(arg, self.strings) if c.startswith("/")]
        elif name in IN_PROCESS_CALLS:
            if name.startswith(("pickle.", "marshal.")) and _only_literal_bytes(node):
                return
            if name.startswith("ctypes.") and _system_library(node):
                return
            self.add(node, "exec", f"{IN_PROCESS_CALLS[name]}: {name}()", True)
        elif name in IMPORT_CALLS:
            module = node.args[0] if node.args else None
            if isinstance(module, ast.Constant) and isinstance(module.value, str):
                self._judge_import(node, module.value)
            else:
                self.add(node, "import", f"imports a module named at run time: {name}()", True)
        elif name in PROCESS_CALLS:
            program = self._agent_program(node, shell=name in _SHELL_CALLS or _has_shell(node))
            if program:
                self.add(
                    node,
                    "program",
                    f"runs agent-writable code '{program}' via {name}()",
                    False,
                    program,
                )

    def _agent_program(self, node: ast.Call, shell: bool) -> str | None:
        if not node.args:
            return None
        first = node.args[0]
        if isinstance(first, (ast.List, ast.Tuple)):
            argv = [" ".join(_constants(e, self.strings)) or "?" for e in first.elts]
            return agent_program(argv, self.roots)
        texts = _constants(first, self.strings)
        for text in texts:
            words = _split(text) if (shell or " " in text) else [text]
            found = agent_program(words, self.roots)
            if found:
                return found
        return None

    def _dotted(self, node: ast.AST) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.aliases.get(node.id, node.id)
        return ".".join([head, *reversed(parts)])


_SHELL_CALLS = frozenset(
    {
        "os.system",
        "os.popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "asyncio.create_subprocess_shell",
    }
)


def _has_shell(node: ast.Call) -> bool:
    return any(
        kw.arg == "shell" and isinstance(kw.value, ast.Constant) and bool(kw.value.value)
        for kw in node.keywords
    )


def _system_library(node: ast.Call) -> bool:
    """ctypes.CDLL(None) (the process itself) or a bare library name (found by the loader in
    the system's folders, not in a path the agent could have written)."""
    if not node.args or not isinstance(node.args[0], ast.Constant):
        return False
    value = node.args[0].value
    return value is None or (isinstance(value, str) and "/" not in value)


def _only_literal_bytes(node: ast.Call) -> bool:
    return bool(node.args) and all(
        isinstance(a, ast.Constant) and isinstance(a.value, bytes) for a in node.args
    )


def _constants(node: ast.AST, known: Mapping[str, list[str]]) -> list[str]:
    """The string an expression evidently holds: constants, f-strings with `{}` for the parts
    we cannot know, `a + b` and `a / b` (pathlib) joins, os.path.join, and names assigned a
    constant elsewhere in the file. Several strings when a name had several values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out = ""
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                out += part.value
            elif isinstance(part, ast.FormattedValue):
                inner = _constants(part.value, known)
                out += inner[0] if len(inner) == 1 else "{}"
        return [out]
    if isinstance(node, ast.Name):
        return list(known.get(node.id, []))
    if isinstance(node, ast.Attribute) and node.attr == "executable":
        return ["python3"]  # sys.executable
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
        sep = "/" if isinstance(node.op, ast.Div) else ""
        left, right = _constants(node.left, known), _constants(node.right, known)
        return [f"{a}{sep}{b}" for a in left[:4] for b in right[:4]]
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        parts = [_constants(a, known) for a in node.args]
        if name == "join" and parts and all(parts):
            return ["/".join(p[0] for p in parts)]
        if name in ("Path", "PurePath", "PosixPath", "str", "fspath", "expanduser") and parts:
            return parts[0]
        if name == "home":
            return ["~"]
        if name in ("cwd", "getcwd"):
            return ["."]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [" ".join(c for e in node.elts for c in _constants(e, known)[:1])]
    return []


def _split(text: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return text.split()


def agent_program(argv: Sequence[str], roots: Sequence[str]) -> str | None:
    """The agent-writable file an argv or shell word list would run, if any: a program under an
    agent root (or relative, i.e. in the workdir), or a script given to an interpreter."""
    expect_program = True
    interpreter = sourcing = False
    for word in argv:
        if word in (";", "&&", "||", "|", "&", "(", ")"):
            expect_program, interpreter = True, False
            continue
        if expect_program:
            if "=" in word and not word.startswith(("/", ".", "~")):
                continue  # VAR=value before the command
            expect_program = False
            if word == "." or INTERPRETERS.match(PurePosixPath(word).name):
                interpreter = True  # (PurePosixPath(".").name is "")
                sourcing = word in ("source", ".")
                continue
            if _agent_path(word, roots, relative_ok=True):
                return word
            continue
        if interpreter and not word.startswith("-"):
            if _agent_path(word, roots, relative_ok=True):
                return word
            if sourcing and not word.strip("'\"").startswith(("/", "$")):
                # `source .venv/bin/activate`: a file read from the working folder (the
                # agent's) into test.sh's own shell, whatever its name.
                return word
            if INTERPRETERS.match(PurePosixPath(word).name):
                continue  # `env python3 x.py`, `timeout 5 bash x.sh`
            if not word.replace(".", "").isdigit():
                interpreter = False
    return None


def _agent_path(word: str, roots: Sequence[str], *, relative_ok: bool) -> bool:
    word = word.strip("'\"")
    if not word or word.startswith("-") or word == "{}":
        return False
    if word.startswith(("~/", "$HOME/", "${HOME}/", "$PWD/", "${PWD}/")):
        return True
    if word.startswith("/"):
        return any(word == r or word.startswith(r + "/") for r in roots)
    if word.startswith(("./", "../")):
        return True
    # A relative name is resolved in the workdir (cwd); only a script file name counts, not a
    # command found on PATH.
    return relative_ok and word.endswith(SCRIPT_SUFFIXES)


# CPython 3.11's parser is not safe to enter from two threads at once (gh-106905: "AST
# constructor recursion depth mismatch"), and parallel workers verify at the same time.
_PARSE_LOCK = threading.Lock()


def scan_python(
    name: str, source: str, *, local_modules: Iterable[str] = (), roots: Sequence[str] = ()
) -> list[Evidence]:
    try:
        with _PARSE_LOCK:
            tree = ast.parse(source, filename=name)
    except SyntaxError:
        # It cannot be collected either, and a collection error fails the verifier closed.
        return []
    scanner = _Scanner(name, frozenset(local_modules), roots)
    scanner.visit(tree)
    return _agent_imports(scanner.found, scanner.sys_paths)


def _agent_imports(found: list[Evidence], sys_paths: list[str]) -> list[Evidence]:
    """In a file that puts folders on sys.path (`sys.path.insert(0, "/app")`), the modules it
    imports from outside the standard library and pytest are what those folders hold: the
    agent's code (Terminal-Bench's usual shape), not a package the trusted pytest lacks."""
    if not any(e.kind == "sys_path" for e in found):
        return found
    where = ", ".join(repr(p) for p in dict.fromkeys(sys_paths)) or "a folder named at run time"
    return [
        Evidence(
            e.file,
            e.line,
            "agent_import",
            f"imports '{e.target}' from a folder the tests put on sys.path ({where}): "
            "agent-written code runs in the test process",
            True,
            e.target,
        )
        if e.kind == "import" and e.target
        else e
        for e in found
    ]


def scan_shell(name: str, source: str, *, roots: Sequence[str] = ()) -> list[Evidence]:
    """Lines of a shell script (test.sh) that run an agent-writable program or script."""
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        # The line itself, and the commands it runs inside $(...) and `...` (`out="$(./x.sh)"`).
        inner = re.findall(r"\$\(([^()]*)\)", stripped) + re.findall(r"`([^`]*)`", stripped)
        program = next(
            (p for p in (agent_program(_split(c), roots) for c in (stripped, *inner)) if p), None
        )
        if program:
            detail = f"runs agent-writable code '{program}'"
            found.append(Evidence(name, number, "program", detail, False, program))
    return found

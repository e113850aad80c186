#!/bin/bash
# Runs INSIDE a throwaway container of depthtui/base:bookworm (no network) and copies that image's
# Python 3.11, its standard library, pytest and every shared library they load into /out, so the
# folder runs on any x86-64 Linux through its own loader:
#   /out/lib/ld-linux-x86-64.so.2 --library-path /out/lib /out/bin/python3.11 -I -S ...
# Inputs (read-only): /in/runner.py and /in/site-packages/ (pytest-timeout's and
# pytest-json-ctrf's files).
set -euo pipefail
OUT=/out
PY=/usr/bin/python3.11
STDLIB=/usr/lib/python3.11

mkdir -p "$OUT/bin" "$OUT/lib/python3" "$OUT/runner"
cp -p "$PY" "$OUT/bin/python3.11"
# The standard library, without parts no test needs (GUI, bundled pip wheels, the test suite).
cp -a "$STDLIB" "$OUT/lib/python3.11"
rm -rf "$OUT/lib/python3.11/"{test,idlelib,tkinter,turtledemo,ensurepip,lib2to3} \
       "$OUT/lib/python3.11/"config-3.11-*
# pytest and its dependencies as Debian ships them (python3-pytest).
cp -a /usr/lib/python3/dist-packages "$OUT/lib/python3/dist-packages"
rm -rf "$OUT/lib/python3/dist-packages/pkg_resources"

# Every shared library the interpreter and its extension modules load, under the name ldd shows
# (the soname), plus the loader itself.
for f in "$PY" "$STDLIB"/lib-dynload/*.so; do ldd "$f"; done \
    | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u \
    | while read -r name path; do cp -L "$path" "$OUT/lib/$name"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$OUT/lib/ld-linux-x86-64.so.2"

# pytest-timeout and pytest-json-ctrf (pure Python), unpacked from their wheels by toolchain.sh.
cp -r /in/site-packages/. "$OUT/lib/python3/dist-packages/"

cp /in/runner.py "$OUT/runner/runner.py"

# Wrappers: `python3` (what tests get as sys.executable) and `pytest` (Harbor test.sh mode).
# Plain POSIX sh with no external program, so they need nothing from the image but /bin/sh.
cat > "$OUT/bin/python3" <<'SH'
#!/bin/sh
# depthtui trusted toolchain: run its Python through its own loader and libraries.
tc="${0%/bin/*}"
exec "$tc/lib/ld-linux-x86-64.so.2" --inhibit-cache --library-path "$tc/lib" "$tc/bin/python3.11" "$@"
SH
cat > "$OUT/bin/pytest" <<'SH'
#!/bin/sh
# depthtui trusted toolchain: pytest in isolated mode, no plugin autoload, no conftest, no cache.
tc="${0%/bin/*}"
exec "$tc/lib/ld-linux-x86-64.so.2" --inhibit-cache --library-path "$tc/lib" \
    "$tc/bin/python3.11" -I -S "$tc/runner/runner.py" --plain "$@"
SH
chmod 755 "$OUT/bin/python3" "$OUT/bin/pytest"

# Bytecode now, since the folder is mounted read-only later.
"$PY" -m compileall -q "$OUT/lib/python3/dist-packages" >/dev/null || true

# Smoke test through the loader, as the verifier will run it.
"$OUT/lib/ld-linux-x86-64.so.2" --inhibit-cache --library-path "$OUT/lib" "$OUT/bin/python3.11" -I -S -c '
import sys, os
sys.path.append(os.path.join(sys.prefix, "lib", "python3", "dist-packages"))
assert sys.prefix == "/out", sys.prefix
import ctypes, hashlib, hmac, json, ssl, sqlite3, decimal, pytest, pytest_timeout, ctrf.main
from importlib.metadata import version
print(sys.version.split()[0], pytest.__version__, version("pytest-timeout"), version("pytest-json-ctrf"))
' > "$OUT/versions.txt"

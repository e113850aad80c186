#!/usr/bin/env bash
# Build the trusted verifier toolchain: a relocatable Python 3.11 + pytest + pytest-timeout +
# pytest-json-ctrf (Terminal-Bench test.sh files pass `--ctrf`) + the verifier's runner, in one
# folder that verifier containers mount read-only (docs/verifier.md, docs/verifier-tests.md).
#
#   docker/toolchain.sh            build it unless it is already up to date
#   docker/toolchain.sh --force    rebuild it
#
# Where: $DEPTHTUI_TOOLCHAIN, else $DEPTHTUI_CACHE/toolchain, else ~/.cache/depthtui/toolchain
# (engine/verify/toolchain.py resolves the same path). Offline once the two plugin wheels are
# cached ($CACHE/wheels, filled from PyPI by the first run): the interpreter comes from the local image depthtui/base:bookworm, the build container
# has no network. TOOLCHAIN.json records the versions and a hash of every file.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE="${DEPTHTUI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/depthtui}"
DEST="${DEPTHTUI_TOOLCHAIN:-$CACHE/toolchain}"
IMAGE="${DEPTHTUI_TOOLCHAIN_IMAGE:-depthtui/base:bookworm}"
WHEEL=pytest_timeout-2.4.0-py3-none-any.whl
WHEEL_SHA256=c42667e5cdadb151aeb5b26d114aff6bdf5a907f176a007a30b940d3d865b5c2
MODULE_SHA256=a0bd61d881212d27a922b8fa008b79270a55bcbec467f948d2423a152d37233a  # pytest_timeout.py
# The release Terminal-Bench's test.sh files pin (`-w pytest-json-ctrf==0.3.5`).
CTRF_WHEEL=pytest_json_ctrf-0.3.5-py3-none-any.whl
CTRF_WHEEL_SHA256=e82fd1d69be2f92385bc33540063e5ad7b17b36de67764c84f3ceb9815a895e9
RECIPE_FILES=(docker/toolchain.sh docker/toolchain/build.sh engine/verify/runner.py)

say() { printf '\033[1m[toolchain]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[toolchain] error:\033[0m %s\n' "$*" >&2; exit 1; }

# The recipe hash: when none of the files that make the toolchain changed, there is nothing to do.
recipe=$(cat "${RECIPE_FILES[@]}" | sha256sum | cut -d' ' -f1)
if [ "${1:-}" != --force ] && [ -f "$DEST/TOOLCHAIN.json" ] \
    && grep -q "\"recipe\": \"$recipe\"" "$DEST/TOOLCHAIN.json"; then
    say "up to date ($DEST)"
    exit 0
fi

docker image inspect "$IMAGE" >/dev/null 2>&1 \
    || die "image $IMAGE is missing; run docker/setup.sh first (it builds it offline)"

# The plugins: pure-Python wheels from PyPI, pinned by hash and cached for offline rebuilds.
wheels="$CACHE/wheels"
mkdir -p "$wheels"
wheel_ok() { [ -f "$wheels/$1" ] && echo "$2  $wheels/$1" | sha256sum -c --status; }
fetch_wheel() {  # WHEEL SHA256 REQUIREMENT
    wheel_ok "$1" "$2" && return 0
    say "downloading $1 from PyPI"
    local pip=("$ROOT/.venv/bin/pip")
    [ -x "${pip[0]}" ] || pip=(python3 -m pip)
    "${pip[@]}" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        "$3" -d "$wheels" >/dev/null 2>&1 || true
}
fetch_wheel "$WHEEL" "$WHEEL_SHA256" "pytest-timeout==2.4.0"
fetch_wheel "$CTRF_WHEEL" "$CTRF_WHEEL_SHA256" "pytest-json-ctrf==0.3.5"
say "building from $IMAGE into $DEST"
mkdir -p "$(dirname "$DEST")"
new="$DEST.new.$$"
inputs="$(mktemp -d)"
trap 'rm -rf "$new" "$inputs"' EXIT
mkdir -p "$new" "$inputs/site-packages"
cp engine/verify/runner.py docker/toolchain/build.sh "$inputs/"
wheel_ok "$CTRF_WHEEL" "$CTRF_WHEEL_SHA256" \
    || die "no $CTRF_WHEEL (sha256 $CTRF_WHEEL_SHA256) in $wheels and PyPI unreachable; put it there and rerun"
python3 -m zipfile -e "$wheels/$CTRF_WHEEL" "$inputs/site-packages/"
# offline with no cached pytest-timeout wheel, the same release already installed in our
# virtualenv (its module pinned by hash) will do.
if wheel_ok "$WHEEL" "$WHEEL_SHA256"; then
    python3 -m zipfile -e "$wheels/$WHEEL" "$inputs/site-packages/"
else
    venv_site=$(ls -d "$ROOT"/.venv/lib/python3*/site-packages 2>/dev/null | head -n1)
    [ -n "$venv_site" ] && [ -d "$venv_site/pytest_timeout-2.4.0.dist-info" ] \
        && echo "$MODULE_SHA256  $venv_site/pytest_timeout.py" | sha256sum -c --status \
        || die "no $WHEEL (sha256 $WHEEL_SHA256) in $wheels and PyPI unreachable; put it there and rerun"
    say "PyPI unreachable: using pytest-timeout 2.4.0 from $venv_site"
    cp "$venv_site/pytest_timeout.py" "$inputs/site-packages/"
    cp -r "$venv_site/pytest_timeout-2.4.0.dist-info" "$inputs/site-packages/"
fi
chmod -R a+rX "$inputs"
docker run --rm --network none --label depthtui.role=toolchain-build \
    --user "$(id -u):$(id -g)" \
    -v "$inputs:/in:ro" -v "$new:/out" \
    --entrypoint /bin/bash "$IMAGE" /in/build.sh \
    || die "the build container failed (image $IMAGE)"

# Hash every file (path, mode, bytes) so a verdict can name the exact toolchain that produced it.
chmod -R a+rX,go-w "$new"
python3 - "$new" "$recipe" "$IMAGE" "$(docker image inspect -f '{{.Id}}' "$IMAGE")" <<'PY'
import hashlib, json, os, sys
from datetime import datetime, timezone
root, recipe, image, image_id = sys.argv[1:5]
tree = hashlib.sha256()
count = size = 0
for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(filenames):
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root)
        st = os.lstat(path)
        if os.path.islink(path):
            data = os.readlink(path).encode()
        else:
            with open(path, "rb") as f:
                data = f.read()
        tree.update(f"{rel}\0{st.st_mode:o}\0{hashlib.sha256(data).hexdigest()}\n".encode())
        count += 1
        size += len(data)
with open(os.path.join(root, "versions.txt")) as f:
    python, pytest, pytest_timeout, pytest_json_ctrf = f.read().split()
with open(os.path.join(root, "runner", "runner.py"), "rb") as f:
    runner_sha = hashlib.sha256(f.read()).hexdigest()
info = {
    "sha256": tree.hexdigest(), "recipe": recipe, "python": python, "pytest": pytest,
    "pytest_timeout": pytest_timeout, "pytest_json_ctrf": pytest_json_ctrf, "runner_sha256": runner_sha, "files": count, "bytes": size,
    "source_image": image, "source_image_id": image_id,
    "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
}
with open(os.path.join(root, "TOOLCHAIN.json"), "w") as f:
    json.dump(info, f, indent=1)
    f.write("\n")
print(f"python {python}, pytest {pytest}, pytest-timeout {pytest_timeout}, "
      f"pytest-json-ctrf {pytest_json_ctrf}; "
      f"{count} files, {size / 1e6:.0f} MB; sha256 {info['sha256'][:16]}")
PY

# Swap in the new folder in one rename, so a verifier never mounts a half-built toolchain.
old="$DEST.old.$$"
[ -e "$DEST" ] && mv "$DEST" "$old"
mv "$new" "$DEST"
rm -rf "$old"
say "ready: $DEST"

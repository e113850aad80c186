#!/usr/bin/env bash
# Set up everything depthtui needs on this machine, then optionally run the demo or the tests.
#
#   docker/setup.sh          set up only
#   docker/setup.sh demo     set up, then run the main job on the bundled demo dataset
#   docker/setup.sh test     set up (plus the second test distribution and Chromium), then run the test suite
#
# Idempotent: every step checks first and skips what is already done.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-setup}"
shift || true
CACHE="${DEPTHTUI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/depthtui}"
DOCKERD_LOG="${DEPTHTUI_DOCKERD_LOG:-/var/log/depthtui-dockerd.log}"
MIRROR="${DEPTHTUI_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
VENV="$ROOT/.venv"
mkdir -p "$CACHE"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }
SECONDS=0

# --- 1. Python virtual environment with the package installed -------------------------------
setup_venv() {
    local stamp="$VENV/.depthtui-installed" want
    want=$(sha256sum pyproject.toml | cut -c1-16)
    if [ -x "$VENV/bin/depthtui" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        say "virtual environment: up to date ($VENV)"
        return
    fi
    say "virtual environment: installing depthtui, its dev tools and Ray into $VENV"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -e ".[dev,ray,web]" >"$CACHE/pip.log" 2>&1 \
        || die "pip install failed; see $CACHE/pip.log"
    echo "$want" > "$stamp"
}

# --- 2. A Docker engine that answers ----------------------------------------------------------
docker_ok() { timeout 20 docker info >/dev/null 2>&1; }

setup_docker() {
    if docker_ok; then
        say "docker engine: answering"
        return
    fi
    is_root || die "no Docker engine answers and we are not root: start dockerd, or run this as root"
    if ! command -v dockerd >/dev/null 2>&1; then
        [ -f /etc/debian_version ] || die "no Docker engine and this is not Debian: install Docker yourself"
        say "docker engine: installing Debian's docker.io (apt-get)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q docker.io >>"$CACHE/apt.log" 2>&1 \
            || { apt-get update -q >>"$CACHE/apt.log" 2>&1 && apt-get install -y -q docker.io >>"$CACHE/apt.log" 2>&1; } \
            || die "apt-get install docker.io failed; see $CACHE/apt.log"
    fi
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        say "docker engine: starting dockerd in the background (log: $DOCKERD_LOG)"
        mkdir -p "$(dirname "$DOCKERD_LOG")"
        # setsid: the engine outlives the shell (and the session) that started it.
        setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
        disown || true
    fi
    for _ in $(seq 1 60); do
        docker_ok && { say "docker engine: up"; return; }
        sleep 1
    done
    die "dockerd did not answer within 60 s; see $DOCKERD_LOG"
}

# --- 3. Base images -----------------------------------------------------------------------------
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# Import a minimal Debian root made by debootstrap as image $2 (suite $1); cached as a tarball.
import_rootfs() {
    local suite="$1" image="$2" tarball="$CACHE/rootfs-$1.tar"
    if [ ! -s "$tarball" ]; then
        is_root || die "debootstrap needs root"
        command -v debootstrap >/dev/null 2>&1 || {
            say "installing debootstrap (apt-get)"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >>"$CACHE/apt.log" 2>&1 \
                || die "apt-get install debootstrap failed; see $CACHE/apt.log"
        }
        local dir="$CACHE/rootfs-$suite"
        rm -rf "$dir"
        say "base image: debootstrap --variant=minbase $suite (about a minute; log: $CACHE/debootstrap-$suite.log)"
        debootstrap --variant=minbase --include=python3,python3-pytest,procps,ca-certificates \
            "$suite" "$dir" "$MIRROR" >"$CACHE/debootstrap-$suite.log" 2>&1 \
            || die "debootstrap $suite failed; see $CACHE/debootstrap-$suite.log"
        rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
        tar -C "$dir" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
        rm -rf "$dir"
    fi
    say "base image: docker import $image"
    docker import "$tarball" "$image" >/dev/null
}

build_base() {
    local suite="$1" image="depthtui/base:$1" from
    if have_image "$image"; then
        say "base image: $image present"
        return
    fi
    if have_image "debian:$suite-slim" || timeout 60 docker pull -q "debian:$suite-slim" >/dev/null 2>&1; then
        from="debian:$suite-slim"
    else
        from="depthtui/rootfs:$suite"
        have_image "$from" || import_rootfs "$suite" "$from"
    fi
    say "base image: building $image from $from"
    docker build -q -t "$image" --build-arg "BASE=$from" -f docker/base.Dockerfile docker \
        >"$CACHE/build-base-$suite.log" 2>&1 || die "building $image failed; see $CACHE/build-base-$suite.log"
}

# Components added by later parts of the engine (the trusted verifier toolchain) hook in here.
setup_extras() {
    if [ -x docker/toolchain.sh ]; then
        docker/toolchain.sh
    fi
}

# The test suite loads `depthtui tui --web` in a headless browser (tests/test_tui_web.py).
setup_test_browser() {
    if command -v chromium >/dev/null 2>&1; then
        say "browser for the web test: chromium present"
        return
    fi
    is_root || { say "browser for the web test: not root, chromium not installed (that test skips)"; return; }
    say "browser for the web test: installing Debian's chromium (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >>"$CACHE/apt.log" 2>&1 \
        || { apt-get update -q >>"$CACHE/apt.log" 2>&1 && apt-get install -y -q chromium >>"$CACHE/apt.log" 2>&1; } \
        || die "apt-get install chromium failed; see $CACHE/apt.log"
}

setup_venv
setup_docker
build_base bookworm
[ "$MODE" = test ] && build_base bullseye
[ "$MODE" = test ] && setup_test_browser
setup_extras
say "set-up done in ${SECONDS} s"

case "$MODE" in
    setup) ;;
    demo) exec "$VENV/bin/depthtui" demo "$@" ;;
    # Two workers, one test file each at a time: most tests wait on Docker, not on a core.
    test) exec "$VENV/bin/pytest" -n "${DEPTHTUI_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@" ;;
    *) die "unknown mode '$MODE' (expected: setup, demo or test)" ;;
esac

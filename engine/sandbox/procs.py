"""Root-side shell scripts the harness runs inside a container (`sh -c SCRIPT sh ARGS...`).

They use only POSIX sh builtins and /proc, so they work in any task image that has /bin/sh
(Debian, Ubuntu, Alpine's busybox) without trusting any binary of the image beyond sh itself.
Each prints one line per process it acted on: `pid comm`.
"""

from __future__ import annotations

# Lists every process as "pid ppid uid starttime comm" (starttime in clock ticks since boot).
_LIST = r"""
list_procs() {
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        read -r line 2>/dev/null < "$d/stat" || continue
        uid=
        while read -r key a _ ; do
            if [ "$key" = "Uid:" ]; then uid=$a; break; fi
        done 2>/dev/null < "$d/status"
        comm=${line#*(}; comm=${comm%)*}
        rest=${line##*) }
        set -- $rest
        echo "$p $2 $uid ${20} $comm"
    done
}
"""

# $1 = the agent shell's pid; $2 = the last pid the kernel had handed out when the command began
# (from /proc/loadavg); $3 = the clock tick since boot it began in, or empty when the engine's
# clock is not ours to read. A process is the command's if it descends from the shell and is
# newer: a higher pid, or (after the pid counter wrapped) a later tick. Earlier background jobs
# are left alone, and so is the shell itself.
KILL_COMMAND = (
    _LIST
    + r"""
shell=$1; lastpid=$2; tick=$3
procs=$(list_procs)
tree=" $shell "
grew=1
while [ $grew = 1 ]; do
    grew=0
    while read -r p pp uid start comm; do
        case "$tree" in *" $p "*) continue ;; esac
        case "$tree" in *" $pp "*) tree="$tree$p "; grew=1 ;; esac
    done <<EOF
$procs
EOF
done
# Stopped first, all of them, then killed: killed one by one, a pipeline's reader could see
# end of file and exit (or a process fork again) before its own turn came.
victims=
while read -r p pp uid start comm; do
    [ "$p" = "$shell" ] && continue
    case "$tree" in *" $p "*) ;; *) continue ;; esac
    if [ "$p" -le "$lastpid" ]; then
        [ -n "$tick" ] && [ "$start" -gt "$tick" ] || continue
    fi
    kill -STOP "$p" 2>/dev/null && victims="$victims$p $comm
"
done <<EOF
$procs
EOF
while read -r p comm; do
    [ -n "$p" ] && kill -9 "$p" 2>/dev/null && echo "$p $comm"
done <<EOF
$victims
EOF
exit 0
"""
)

# $1 = a pid. Prints "cwd <dir>": where that process is. Run as the process's own user: root
# without CAP_SYS_PTRACE may not look into another user's process.
CWD_OF = r"""
cd "/proc/$1/cwd" 2>/dev/null && echo "cwd $(pwd -P)"
exit 0
"""

# $1 = a uid, $2 = pid of the container's sleeper (kept). Kills every process of that uid but
# pid 1, the sleeper and its children, and this script. For a root agent, where `kill -1` as the
# agent would take the sleeper too.
KILL_UID = (
    _LIST
    + r"""
target=$1; keep=" 1 $2 $$ "; parents=" $2 $$ "
for round in 1 2 3 4 5; do
    n=0
    while read -r p pp uid start comm; do
        [ "$uid" = "$target" ] || continue
        case "$keep" in *" $p "*) continue ;; esac
        case "$parents" in *" $pp "*) continue ;; esac
        kill -9 "$p" 2>/dev/null && { echo "$p $comm"; n=$((n + 1)); }
    done <<EOF
$(list_procs)
EOF
    [ $n = 0 ] && break
done
exit 0
"""
)

# $1 = the agent's uid. Run AS the agent: prints its processes (this script aside), then
# kill(-1) sweeps every one of them at once, again until nothing is left to signal (Linux does
# not signal the caller), so even a fork bomb is gone when it exits 0. One exec instead of a
# list, a kill and a check.
KILL_OWN = (
    _LIST
    + r"""
me=$$; target=$1
# Is any other live process of ours left? (Killed ones linger as zombies until reaped, and
# signalling a zombie still "succeeds", so kill's own status cannot say.)
others() {
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        [ "$p" = "$me" ] && continue
        read -r line 2>/dev/null < "$d/stat" || continue
        set -- ${line##*) }
        [ "$1" = Z ] || [ "$2" = "$me" ] && continue
        while read -r key a _ ; do
            if [ "$key" = "Uid:" ]; then [ "$a" = "$target" ] && return 0; break; fi
        done 2>/dev/null < "$d/status"
    done
    return 1
}
procs=$(list_procs)
while read -r p pp uid start comm; do
    [ "$uid" = "$target" ] || continue
    [ "$p" = "$me" ] || [ "$pp" = "$me" ] && continue
    echo "$p $comm"
done <<EOF
$procs
EOF
i=0
while [ $i -lt 50 ]; do
    kill -9 -1 2>/dev/null || exit 0
    others || exit 0
    i=$((i + 1))
done
exit 1
"""
)

# $1 = a uid. Prints "pid comm" for each process of that uid.
LIST_UID = (
    _LIST
    + r"""
list_procs | while read -r p pp uid start comm; do
    [ "$uid" = "$1" ] && echo "$p $comm"
done
exit 0
"""
)


def sh(script: str, *args: object) -> list[str]:
    """argv that runs `script` with positional arguments under /bin/sh."""
    return ["/bin/sh", "-c", script, "sh", *(str(a) for a in args)]


def parse_pids(output: bytes) -> list[tuple[int, str]]:
    """The `pid comm` lines the scripts print."""
    found = []
    for line in output.decode("utf-8", "replace").splitlines():
        pid, _, comm = line.strip().partition(" ")
        if pid.isdigit():
            found.append((int(pid), comm))
    return found

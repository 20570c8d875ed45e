#!/bin/bash
# Compare `counterpoint stat` with `perf stat` (Debian linux-perf) on several programs:
# 5 runs each (alternating the two tools so machine load hits both alike), medians of
# task-clock, context-switches, page-faults, cpu-migrations, and the relative difference.
# Goals (issue 2): page-faults within 2 %, task-clock within 10 %.
# Usage: scripts/compare-perf.sh [RUNS]     (builds target/release/counterpoint if needed)
set -euo pipefail
runs=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
cp_bin="$root/target/release/counterpoint"
if [ ! -x "$cp_bin" ]; then
    (cd "$root" && cargo build --release -p counterpoint >&2)
fi
perf_bin=$(command -v perf || ls /usr/bin/perf_* 2>/dev/null | head -n1 || true)
[ -n "$perf_bin" ] || { echo "no perf binary: run scripts/setup.d/counters.sh" >&2; exit 1; }
events=task-clock,context-switches,page-faults,cpu-migrations
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

# Inputs: a ~50 MB text file for gzip, a shuffled number file for sort.
seq 1 7000000 > "$work/big.txt"
seq 1 1500000 | shuf --random-source=<(yes) > "$work/shuffled.txt"

# An absolute interpreter: a PATH lookup can differ between the tools (perf prepends
# /usr/lib/perf-core and sets PREFIX, which changes what a pyenv shim runs).
py=$(command -v /usr/bin/python3 || command -v python3)

programs=(
    "ls -R /usr/share > /dev/null"
    "gzip -c $work/big.txt > /dev/null"
    "$py -c 's=0
for i in range(2000000): s+=i*i'"
    "sort -n $work/shuffled.txt > /dev/null"
)
names=("ls -R /usr/share" "gzip -c 50MB" "python3 loop" "sort -n 1.5M lines")

# value of EVENT in a -x, file (column 1 = value, column 3 = event)
val() { awk -F, -v e="$2" '$3 == e { print $1 }' "$1"; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

printf '%-20s %-17s %14s %14s %9s  %s\n' program event perf counterpoint diff% goal
fail=0
for i in "${!programs[@]}"; do
    prog=${programs[$i]}
    for r in $(seq 1 "$runs"); do
        "$perf_bin" stat -x, -o "$work/perf.$i.$r" -e "$events" -- sh -c "$prog"
        "$cp_bin" stat -x, -o "$work/cp.$i.$r" -e "$events" -- sh -c "$prog"
    done
    for ev in task-clock page-faults context-switches cpu-migrations; do
        p=$(for r in $(seq 1 "$runs"); do val "$work/perf.$i.$r" "$ev"; done | median)
        c=$(for r in $(seq 1 "$runs"); do val "$work/cp.$i.$r" "$ev"; done | median)
        d=$(awk -v p="$p" -v c="$c" 'BEGIN { if (p == 0) print (c == 0 ? "0.00" : "inf"); else printf "%+.2f", (c - p) / p * 100 }')
        goal=""
        case $ev in
            task-clock) lim=10 ;;
            page-faults) lim=2 ;;
            *) lim="" ;;
        esac
        if [ -n "$lim" ]; then
            if awk -v d="$d" -v l="$lim" 'BEGIN { d = (d < 0 ? -d : d); exit !(d <= l) }'; then
                goal="within ${lim}%: ok"
            else
                goal="within ${lim}%: MISSED"; fail=1
            fi
        fi
        printf '%-20s %-17s %14s %14s %9s  %s\n' "${names[$i]}" "$ev" "$p" "$c" "$d" "$goal"
    done
done
echo "(medians of $runs runs; task-clock in msec; machine shared with other jobs)"
exit $fail

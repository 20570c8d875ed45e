#!/bin/sh
# SchedTask on this host (docs/schedtask.md, "Measured here"): two threaded file servers
# (scripts/schedtask-fileserver.py, each with one keep-alive curl client) and a compute pool
# (xz -T2 on /dev/urandom); their live heatmaps, top's SuperFunction column, the schedtask
# agent's grouping (dry run, then live), and the agent's own CPU time in % of a core from
# /proc/PID/schedstat, for `linux` (no sampling), `schedtask`, and `schedtask --syscalls`.
#
#   scripts/schedtask-live.sh [path/to/counterpoint] [intervals] [roles]
#
# With `roles`: one process with distinct thread roles instead (scripts/schedtask-roles.c, built
# with cc: two I/O threads, a stat(2) thread and two compute threads), its per-thread heatmaps,
# the agent's thread-level grouping (dry run, then live, with each thread's CPUs mid-run from
# /proc/PID/task/TID/status), and the agent's CPU time as above.
#
# Per-system-call attribution needs tracefs (as root: mount -t tracefs nodev /sys/kernel/tracing);
# without it the --syscalls steps say what is missing and the rest runs.
set -u
CP=${1:-target/release/counterpoint}
N=${2:-10}
DIR=$(mktemp -d /tmp/schedtask-live.XXXXXX)
mkdir -p "$DIR/files"
for i in $(seq 1 20); do head -c 262144 /dev/urandom > "$DIR/files/f$i"; done
HERE=$(dirname "$0")
MODE=${3:-servers}
if [ "$MODE" = roles ]; then
  cc -O1 -pthread -o "$DIR/roles" "$HERE/schedtask-roles.c" || exit 1
  # Long enough for the heatmap and four agent runs of N intervals.
  "$DIR/roles" $((4 * N + 30)) 2 & R=$!
  cleanup() { kill $R 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"; }
  trap cleanup EXIT INT TERM
  TARGETS=pid:$R
  sleep 1
  echo "== roles $R (threads: $(for t in /proc/$R/task/*; do printf '%s=%s ' "${t##*/}" "$(cat "$t/comm")"; done)); load: $(cut -d' ' -f1-3 /proc/loadavg)"
  # No --syscalls: the I/O threads' tight loops of trivial calls overrun the tracepoint
  # buffers (see "Cost to the traced threads").
  SYS=
  "$CP" heatmap --pid $R --duration-ms 3000 || exit 1
else
PY=$(command -v python3)
"$PY" "$HERE/schedtask-fileserver.py" 8765 "$DIR/files" & S1=$!
"$PY" "$HERE/schedtask-fileserver.py" 8766 "$DIR/files" & S2=$!
xz -T2 -6 -c < /dev/urandom > /dev/null & X=$!
sleep 1
# One connection per client, 100,000 requests on it: the server thread lives through the run.
curl -s -o /dev/null "http://127.0.0.1:8765/f[1-20]?[1-5000]" & C1=$!
curl -s -o /dev/null "http://127.0.0.1:8766/f[1-20]?[1-5000]" & C2=$!
sleep 2
cleanup() { kill $C1 $C2 $S1 $S2 $X 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT INT TERM
TARGETS=pid:$S1,$S2,$X
echo "== servers $S1 $S2, xz $X; load: $(cut -d' ' -f1-3 /proc/loadavg)"
SYS=--syscalls
"$CP" heatmap --pid $S1 --duration-ms 3000 $SYS || SYS=
"$CP" heatmap --pid $X --duration-ms 3000 $SYS
echo "== top"
"$CP" top --targets $TARGETS --heatmaps $SYS --count 2 --interval 1s
fi
# The agent's CPU time from its schedstat (ns on a CPU) over the wall time.
agent() {
  label=$1; shift
  "$CP" agent --targets $TARGETS --interval 1s --max-intervals "$N" \
    --journal "$DIR/journal" "$@" 2> "$DIR/log.$label" & A=$!
  t0=$(date +%s%N); sleep 0.2
  c0=$(cut -d' ' -f1 /proc/$A/schedstat)
  while kill -0 $A 2>/dev/null; do
    c1=$(cut -d' ' -f1 /proc/$A/schedstat 2>/dev/null || echo "$c1"); t1=$(date +%s%N); sleep 0.1
  done
  wait $A
  echo "== agent $label: $(awk -v c="$c1" -v d="$c0" -v t="$t1" -v s="$t0" \
    'BEGIN { printf "%.2f %% of a core (%.1f ms CPU in %.1f s)", 100*(c-d)/(t-s-2e8), (c-d)/1e6, (t-s)/1e9 }'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
}
agent linux --policy linux --dry-run
agent dry --policy schedtask --dry-run
grep -h '"decision"\|would move\|code_heatmaps' "$DIR/log.dry" | head -12
if [ "$MODE" = roles ]; then
  # Each thread's CPUs in the middle of the live run.
  ( sleep $((N / 2 + 1)); for t in /proc/$R/task/*; do
      echo "   thread ${t##*/} $(cat "$t/comm"): $(grep Cpus_allowed_list "$t/status")"; done \
    > "$DIR/mid" ) &
fi
agent live --policy schedtask
grep -h 'moved task\|moved thread\|thread_gone\|restored' "$DIR/log.live" | head -12
if [ "$MODE" = roles ]; then
  echo "== threads mid-run:"; cat "$DIR/mid"
  echo "== threads after the agent: $(grep -h Cpus_allowed_list /proc/$R/task/*/status | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
fi
if [ -n "$SYS" ]; then agent syscalls --policy schedtask --dry-run --syscalls; fi

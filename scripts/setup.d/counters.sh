#!/bin/sh
# counters: Debian's linux-perf provides `perf` (installed as /usr/bin/perf; on some releases as
# /usr/bin/perf_<version> behind a /usr/bin/perf wrapper). scripts/compare-perf.sh compares
# `counterpoint stat` with it. Idempotent: installs only when missing.
set -e
if ! dpkg -s linux-perf >/dev/null 2>&1; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y linux-perf
fi
perf_bin=$(command -v perf || ls /usr/bin/perf_* 2>/dev/null | head -n1 || true)
if [ -z "$perf_bin" ]; then
    echo "counters setup: linux-perf installed but no perf binary found" >&2
    exit 1
fi
"$perf_bin" --version >/dev/null

#!/bin/sh
# counters: no test needs an extra package (software events are counted through perf_event_open
# directly). With `scripts/setup --extras`: Debian's linux-perf for scripts/compare-perf.sh,
# which compares `counterpoint stat` with `perf stat` (installed as /usr/bin/perf, or as
# /usr/bin/perf_<version> behind a wrapper on some releases).
. "$(dirname "$0")/apt-lib"
if [ -z "${COUNTERPOINT_SETUP_EXTRAS:-}" ]; then
    if apt_installed linux-perf; then
        echo "counters: present: linux-perf (for scripts/compare-perf.sh)" >&2
    else
        echo "counters: nothing needed by the tests; linux-perf (scripts/compare-perf.sh) comes with 'scripts/setup --extras'" >&2
    fi
    exit 0
fi
apt_ensure counters linux-perf || exit $?
perf_bin=$(command -v perf || ls /usr/bin/perf_* 2>/dev/null | head -n1 || true)
if [ -z "$perf_bin" ]; then
    echo "counters: linux-perf installed but no perf binary found" >&2
    exit 1
fi
"$perf_bin" --version >/dev/null || exit 1

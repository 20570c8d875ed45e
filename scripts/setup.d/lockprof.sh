#!/bin/sh
# lockprof: Debian multithreaded programs run under the profiler by the tests (xz, sqlite3 are
# normally present; pigz is not), and g++ for the C++ condition_variable test. Idempotent.
set -e
missing=""
for p in pigz xz-utils sqlite3 binutils g++; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y $missing
fi

#!/bin/sh
# lockprof: real multithreaded programs run under the profiler by the tests (xz and pigz compress
# the same input; sqlite3), binutils' addr2line to check resolved call sites, g++ for the C++
# condition_variable test. Tests skip the programs that are missing, saying so.
. "$(dirname "$0")/apt-lib"
apt_ensure lockprof pigz xz-utils sqlite3 binutils g++

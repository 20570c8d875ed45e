#!/bin/sh
# requests: Debian's `postgresql` server (initdb, pg_ctl, postgres under /usr/lib/postgresql/N/bin).
# crates/requests/tests/postgres.rs, `counterpoint requests run-pg` and `experiment requests`
# start their own cluster in a temporary directory on a Unix socket there (no TCP), as the
# `postgres` user when run as root, and stop it at the end; the package's system service is
# not used. Without the package those tests skip and say why.
. "$(dirname "$0")/apt-lib"
# Debian's package also creates its default cluster (/var/lib/postgresql/N/main) and, where
# systemd runs, starts postgresql.service on port 5432: said when installing.
APT_NOTE="Debian's package also creates its default cluster and starts postgresql.service (port 5432) where systemd runs; the tests use a private cluster and never that one" \
    apt_ensure postgresql postgresql || exit $?
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] || { echo "postgresql: package installed but no initdb/pg_ctl under /usr/lib/postgresql/*/bin" >&2; exit 1; }
echo "postgresql: $("$bin/postgres" --version 2>&1 | head -n1)" >&2

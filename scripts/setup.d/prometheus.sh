#!/bin/sh
# openmetrics: Debian's `prometheus` server. crates/openmetrics/tests/prometheus.rs starts its own
# instance on a free port with a temporary storage dir and a scrape config (never the system
# service), then reads the exporter's series back through the query API. Installing the package
# also enables a system prometheus.service on :9090; the test does not use it.
. "$(dirname "$0")/apt-lib"
APT_NOTE="Debian's package also enables prometheus.service on :9090 where systemd runs; the test starts its own server and never uses that one" \
    apt_ensure prometheus prometheus || exit $?
command -v prometheus >/dev/null 2>&1 || { echo "prometheus: package installed but no prometheus binary on PATH" >&2; exit 1; }
echo "prometheus: $(prometheus --version 2>&1 | head -n1)" >&2

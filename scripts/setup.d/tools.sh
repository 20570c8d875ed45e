#!/bin/sh
# Shared test tools: gcc (`cc` builds the C programs of the selfmon and lockprof tests; Rust
# needs it to link anyway), tmux (drives `top`'s terminal view in crates/cli/tests/top.rs),
# python3 (the topology fixture generator and lockprof's server test). Tests skip without tmux
# or python3, saying so.
. "$(dirname "$0")/apt-lib"
apt_ensure tools gcc tmux python3

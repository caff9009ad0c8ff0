#!/usr/bin/env bash
# The protocol checker (see README, "Correctness"): explores every interleaving of users,
# lost requests and replies, BUSY replies, expiry, force-unlocks and restarts up to a bound,
# running the real lua/ scripts in an embedded Lua 5.1 against an in-memory keyspace and
# the library's own protocol core. Prints `states explored: N` and each property; exits
# non-zero on a violation (with a numbered trace and a replay command).
#   CHECK_DEPTH=15 ./scripts/check-protocol.sh          deeper (default 13)
#   CHECK_REPLAY='<config>:<steps>' ./scripts/check-protocol.sh   replay a counterexample
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --locked --test protocol_check

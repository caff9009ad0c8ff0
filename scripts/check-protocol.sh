#!/usr/bin/env bash
# The protocol checker (see README, "Correctness"): explores every interleaving of users,
# lost requests and replies, BUSY replies, expiry, force-unlocks and restarts up to a bound,
# running the real lua/ scripts in an embedded Lua 5.1 against an in-memory keyspace and
# the library's own protocol core. Prints `states explored: N` and each property; exits
# non-zero on a violation (with a numbered trace and a replay command). Then the teeth.
#   CHECK_DEPTH=15 ./scripts/check-protocol.sh          deeper (default 13)
#   CHECK_REPLAY='<config>:<steps>' ./scripts/check-protocol.sh   replay a counterexample
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --locked --test protocol_check
# The read-write lock's checker (rw_*.lua, sem_renew.lua, late requests): default depth 12, ~60 s.
cargo test --release --locked --test rw_check
# The count-down latch's checker (latch_*.lua, restarts, BUSY, late count-downs): default depth 18, ~10 s.
cargo test --release --locked --test latch_check
# The semaphore's checker (sem_*.lua, late requests, drains, add_permits, extend): default depth 12, ~60 s.
cargo test --release --locked --test sem_check
# The fair lock's checker (fair_*.lua, sem_renew.lua, late requests): default depth 12, ~45 s.
cargo test --release --locked --test fair_check
# RedLock's checker (3 and 2 servers, outages, restarts, drift): default depth 12, ~40 s.
cargo test --release --locked --test redlock_check
# The multi-lock's checker (opposite orders, cycles, lost replies, BUSY, restarts): default
# depth 22, ~35-45 s (late requests included).
cargo test --release --locked --test multi_check
# The waiting loop's checker (protocol::wait, every kind's policy): default depth 10, ~5 s.
cargo test --release --locked --test wait_check -- --include-ignored
# The teeth (planted defects the checker must catch), in a release build: the deep one (the
# re-arm count check, depth 17) is too slow for a debug build. The feature planted-defects
# lets them switch on defects in the Rust core too (constant false without it; the
# checks above run the library exactly as it ships, without the feature).
cargo test --release --locked --features planted-defects --test protocol_teeth -- --include-ignored
cargo test --release --locked --features planted-defects --test rw_teeth -- --include-ignored
cargo test --release --locked --features planted-defects --test latch_teeth
cargo test --release --locked --features planted-defects --test sem_teeth -- --include-ignored
cargo test --release --locked --features planted-defects --test fair_teeth -- --include-ignored
cargo test --release --locked --features planted-defects --test redlock_teeth -- --include-ignored
cargo test --release --locked --features planted-defects --test multi_teeth -- --include-ignored
cargo test --release --locked --features planted-defects --test wait_check -- --include-ignored

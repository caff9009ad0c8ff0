#!/usr/bin/env bash
# The protocol checker (see docs/correctness.md): explores every interleaving of users,
# lost requests and replies, BUSY replies, expiry, force-unlocks and restarts up to a bound,
# running the real lua/ scripts in an embedded Lua 5.1 against an in-memory keyspace and
# the library's own protocol core. Prints `states explored: N` and each property; exits
# non-zero on a violation (with a numbered trace and a replay command). Then the teeth.
#   CHECK_DEPTH=15 ./scripts/check-protocol.sh          deeper (default 13)
#   CHECK_REPLAY='<config>:<steps>' ./scripts/check-protocol.sh   replay a counterexample
set -euo pipefail
cd "$(dirname "$0")/.."
# Every checker is one single-threaded process: they run in two lanes at once (this
# machine has 2 cores), each lane's output printed when the lane ends. Built first, so the
# lanes only run.
#   protocol_check  the reentrant lock: default depth 13 (one configuration 17), ~100 s.
#   rw_check        the read-write lock (rw_*.lua, sem_renew.lua, late requests, extend): depth 12, ~60 s.
#   latch_check     the count-down latch (latch_*.lua, restarts, BUSY, late count-downs): depth 18, ~10 s.
#   sem_check       the semaphore (sem_*.lua, late requests, drains, add_permits, extend): depth 12, ~60 s.
#   fair_check      the fair lock (fair_*.lua, sem_renew.lua, late requests, extend): depth 12, ~75 s.
#   redlock_check   RedLock (3 and 2 servers, outages, restarts, drift, BUSY, force-unlock): depth 12, ~70 s.
#   multi_check     the multi-lock (opposite orders, cycles, lost replies, BUSY, restarts): depth 22, ~40 s.
#   wait_check      the waiting loop (protocol::wait, every kind's policy): depth 10, ~5 s.
#   wake_check      the plain lock's wake-ups (the "\1w" mark, the conditional PUBLISH, the
#                   hub's one-waiter dispatch, protocol::wait): depth 22, ~25 s.
#   redisson_check  the lock in Redisson's layout (redisson_*.lua, late requests, a Redisson
#                   force-unlock, restarts, BUSY): depth 12, ~50 s.
#   redisson_rw_check  the read-write lock in Redisson's layout (redisson_rw_*.lua,
#                   redisson_renew.lua, the same faults): depth 10, ~50 s.
#   redisson_latch_check  the count-down latch in Redisson's layout (redisson_latch_*.lua
#                   beside a Java peer running Redisson's own scripts; lost replies, late
#                   count-downs, BUSY/LOADING, restarts, clobbers, records expiring): depth
#                   20 (most configurations explored in full), ~25 s.
CHECKERS_A=(protocol_check redlock_check wake_check latch_check wait_check redisson_check)
CHECKERS_B=(fair_check rw_check sem_check multi_check redisson_rw_check redisson_latch_check)
# The teeth (planted defects the checker must catch), in a release build: the deep one (the
# re-arm count check, depth 17) is too slow for a debug build. The feature planted-defects
# lets them switch on defects in the Rust core too (constant false without it; the
# checkers run the library exactly as it ships, without the feature). Two lanes as well,
# balanced by their times on this machine (each line of output names a binary's time).
TEETH_A=(redlock_teeth protocol_teeth latch_teeth wake_teeth redisson_teeth)
TEETH_B=(fair_teeth rw_teeth sem_teeth multi_teeth wait_check redisson_rw_teeth redisson_latch_teeth)

# Runs the test binaries named after $1 (the features: "" or "planted-defects") one after
# the other; the ignored tests too (only the by-hand ones are ignored in a release build:
# protocol_teeth's, which is run without them).
run_lane() {
  local features=$1 t start
  shift
  for t in "$@"; do
    start=$SECONDS
    local args=(--release --locked --test "$t")
    [ -n "$features" ] && args+=(--features "$features")
    if [ "$t" = protocol_teeth ]; then
      cargo test "${args[@]}" || return 1
    else
      cargo test "${args[@]}" -- --include-ignored || return 1
    fi
    echo "check-protocol.sh: $t${features:+ ($features)} took $((SECONDS - start)) s"
  done
}

# Runs two lanes at once, each lane's output printed when the lane ends.
two_lanes() {
  local features=$1 logs status=0 lane_a lane_b
  shift
  local -n lane_a_tests=$1 lane_b_tests=$2
  logs=$(mktemp -d)
  run_lane "$features" "${lane_a_tests[@]}" >"$logs/a" 2>&1 &
  lane_a=$!
  run_lane "$features" "${lane_b_tests[@]}" >"$logs/b" 2>&1 &
  lane_b=$!
  wait "$lane_a" || status=1
  cat "$logs/a"
  wait "$lane_b" || status=1
  cat "$logs/b"
  rm -rf "$logs"
  return "$status"
}

build_args=()
for t in "${CHECKERS_A[@]}" "${CHECKERS_B[@]}"; do build_args+=(--test "$t"); done
cargo test --release --locked --no-run "${build_args[@]}"
if ! two_lanes "" CHECKERS_A CHECKERS_B; then
  echo "check-protocol.sh: a checker failed (see its output above)" >&2
  exit 1
fi
build_args=()
for t in "${TEETH_A[@]}" "${TEETH_B[@]}"; do build_args+=(--test "$t"); done
cargo test --release --locked --features planted-defects --no-run "${build_args[@]}"
if ! two_lanes planted-defects TEETH_A TEETH_B; then
  echo "check-protocol.sh: a planted defect was not caught (see the output above)" >&2
  exit 1
fi

#!/usr/bin/env bash
# The whole test suite: installs redis-server if needed, then runs every test. The tests
# start their own redis-server processes on free loopback ports; no running Redis needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
cargo build --all-targets --locked
cargo test --all-targets --locked -- --test-threads="${TEST_THREADS:-4}"
cargo test --doc --locked

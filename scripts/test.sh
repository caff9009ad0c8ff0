#!/usr/bin/env bash
# The whole test suite: installs redis-server if needed, then runs every test. The tests
# start their own redis-server processes on free loopback ports; no running Redis needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
# The declared minimum Rust version (1.85) builds the library and the CLI
# (docs/development.md, "Minimum Rust version"); installs Debian's 1.85 toolchain if needed.
./scripts/msrv.sh
# --all-features: the TLS tests (feature `tls`) are part of the suite.
cargo build --workspace --all-targets --all-features --locked
cargo test --workspace --lib --bins --tests --examples --all-features --locked -- --test-threads="${TEST_THREADS:-4}"
cargo test --workspace --doc --all-features --locked
# The protocol checker at its default bound, in a release build (docs/correctness.md).
./scripts/check-protocol.sh
# Smoke test of the benchmark command: it must run and find no correctness violation
# (it exits non-zero on one). Its timings are not checked here. SKIP_BENCH_SMOKE=1 skips.
if [ -z "${SKIP_BENCH_SMOKE:-}" ]; then
  cargo bench --bench locks --locked -- --quick
fi

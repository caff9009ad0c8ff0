#!/usr/bin/env bash
# The benchmark (issue #3): installs redis-server if needed, then runs
#   cargo bench --bench locks -- "$@"
# e.g. ./scripts/bench.sh --quick, ./scripts/bench.sh --scenario S1,S3
# The benchmark starts and stops its own redis-server on a free loopback port; it prints
# one JSON line per result ({"scenario":...}) and a Markdown table, and exits non-zero on
# a correctness failure (mutual-exclusion violations, lost locks, worker errors).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
cargo bench --bench locks -- "$@"

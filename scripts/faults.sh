#!/usr/bin/env bash
# The fault suite at a heavier scale: worker processes x tasks contend for a fenced lock on
# real redis-server processes while holders are SIGKILLed and SIGSTOPped, Redis is killed
# and restarted empty, connections are broken by a TCP fault proxy, scripts are flushed and
# runtimes shut down. Prints one `FAULT <n> <name>: ...` result line per scenario.
#
#   ./scripts/faults.sh                 # FAULTS_SCALE=5
#   FAULTS_SCALE=10 ./scripts/faults.sh # heavier
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
FAULTS_SCALE=${FAULTS_SCALE:-5} cargo test --release --test faults -- --nocapture --test-threads=1

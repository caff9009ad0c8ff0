#!/usr/bin/env bash
# The demo: installs redis-server if needed, starts a throw-away one on a free loopback
# port (unless REDIS_URL is set), and runs the examples against it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
cargo build --examples --features blocking,metrics --locked
if [ -z "${REDIS_URL:-}" ]; then
  dir="$(mktemp -d)"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))"
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize no >"$dir/redis.log" 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  export REDIS_URL="redis://127.0.0.1:$port"
  echo "demo: started redis-server on $REDIS_URL"
fi
cargo run -q --locked --example quickstart
cargo run -q --locked --example long_job
cargo run -q --locked --example service
cargo run -q --locked --features blocking --example blocking
cargo run -q --locked --features metrics --example observability

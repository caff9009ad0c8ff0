#!/usr/bin/env bash
# Makes sure redis-server (and redis-cli) are installed. Sourced or run by the other scripts.
# Installs Debian's redis-server package when running as root with apt-get; otherwise says
# exactly what is missing.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "redis-server not found: installing Debian's redis-server package" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server redis-tools >/dev/null
  # The package may start a system service; the project never uses it.
  command -v redis-server >/dev/null 2>&1 || { echo "redis-server still missing after apt-get" >&2; exit 1; }
  exit 0
fi
echo "missing: redis-server and redis-cli (Debian/Ubuntu: 'sudo apt-get install -y redis-server')" >&2
exit 1

#!/usr/bin/env bash
# Makes sure the programs the demo, tests and benchmark need are installed: redis-server
# and redis-cli (Debian's redis-server / redis-tools), and openssl (the TLS tests make
# their own certificates with it). Installs them with apt-get when running as root;
# otherwise says exactly what is missing.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  # The redis-server package may start a system service; the project never uses it.
  for bin in redis-server redis-cli openssl; do
    command -v "$bin" >/dev/null 2>&1 || { echo "$bin still missing after apt-get" >&2; exit 1; }
  done
  exit 0
fi
echo "missing Debian packages: ${missing[*]} (run as root: apt-get install -y ${missing[*]})" >&2
exit 1

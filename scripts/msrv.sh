#!/usr/bin/env bash
# Checks that the library and the CLI build with the declared minimum Rust version
# (`rust-version` in Cargo.toml: 1.85), with Debian bookworm's packaged toolchain
# (`rustc-web` / `cargo-web` 1.85), installed here when it is missing.
#
# What it builds: both packages' library and the CLI, every feature (`cargo check`). Not
# the tests, benches or examples: their dev-dependencies (mlua 0.12, rslock 0.10 with
# redis 1.8) need Rust 1.88, so the test suite needs 1.88 or later.
#
# The dependency versions come from `scripts/msrv.lock`, a lockfile of the dependencies
# only (no dev-dependencies), resolved with cargo's MSRV-aware resolver (the newest
# versions whose own `rust-version` is at most 1.85). It is what a user on Rust 1.85 gets.
#   ./scripts/msrv.sh           check against the committed lockfile
#   ./scripts/msrv.sh --update  re-resolve it (after a dependency change), then check
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
deb_version="1.85.0+dfsg3-1~deb12u3"

# Debian installs the toolchain as /usr/bin/cargo and /usr/bin/rustc; rustup's proxies
# usually come first on PATH, so both are named by path.
cargo_msrv=/usr/bin/cargo
rustc_msrv=/usr/bin/rustc
if ! "$rustc_msrv" --version 2>/dev/null | grep -q "^rustc $msrv"; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "msrv: installing Debian's rustc-web and cargo-web $deb_version"
    apt-get update -qq >/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      "rustc-web=$deb_version" "cargo-web=$deb_version" >/dev/null
  else
    echo "msrv: needs rustc $msrv at $rustc_msrv (Debian bookworm: apt-get install" \
      "rustc-web=$deb_version cargo-web=$deb_version, as root)" >&2
    exit 1
  fi
fi
"$rustc_msrv" --version | grep -q "^rustc $msrv" || {
  echo "msrv: $rustc_msrv is $("$rustc_msrv" --version), not $msrv" >&2
  exit 1
}

# A copy of the tree without the dev-dependencies, so that they neither resolve nor
# build.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git ls-files -z --cached --others --exclude-standard | grep -zv '^target/' |
  (cd "$root" && xargs -0 cp --parents -P -t "$work" 2>/dev/null || true)
for manifest in "$work/Cargo.toml" "$work/protocol/Cargo.toml"; do
  awk '/^\[dev-dependencies\]/ { skip = 1; next } /^\[/ { skip = 0 } !skip' \
    "$manifest" > "$manifest.new"
  mv "$manifest.new" "$manifest"
done

export RUSTC="$rustc_msrv" RUSTDOC=/usr/bin/rustdoc
export CARGO_TARGET_DIR="$root/target/msrv"
if [ "${1:-}" = "--update" ]; then
  (cd "$work" && CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback \
    "$cargo_msrv" generate-lockfile)
  cp "$work/Cargo.lock" scripts/msrv.lock
  echo "msrv: wrote scripts/msrv.lock"
else
  cp scripts/msrv.lock "$work/Cargo.lock"
fi
echo "msrv: cargo check with $("$rustc_msrv" --version)"
(cd "$work" && "$cargo_msrv" check --workspace --lib --bins --all-features --locked) || {
  echo "msrv: failed. If a dependency changed, re-resolve: ./scripts/msrv.sh --update" >&2
  exit 1
}
echo "msrv: the library and the CLI build with Rust $msrv"

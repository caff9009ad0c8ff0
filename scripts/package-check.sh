#!/usr/bin/env bash
# What a release would ship, checked without publishing (issue 25):
#   each package's file list (only what a user needs: see `include` in each Cargo.toml),
#   `cargo publish --workspace --dry-run` with verification (both packages, the protocol
#   core first, each build on its own from what it ships), and the docs with warnings as
#   errors (every feature, as docs.rs builds them, without nightly's `--cfg docsrs`).
# Needs only the Rust toolchain; no redis-server. Pass --allow-dirty to check an
# uncommitted tree.
set -euo pipefail
cd "$(dirname "$0")/.."
for package in redis-locks-protocol redis-locks; do
  echo "== cargo package --list -p $package"
  cargo package --list -p "$package" "$@"
done
echo "== cargo publish --workspace --dry-run"
cargo publish --workspace --dry-run "$@"
echo "== cargo doc --workspace --all-features --no-deps (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps
# docs.rs builds with nightly and `--cfg docsrs` (the `doc(cfg)` feature notes): checked
# when a nightly toolchain is installed, skipped with a note otherwise.
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "== cargo +nightly doc, as docs.rs builds it (--cfg docsrs)"
  RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo +nightly doc --workspace --all-features --no-deps
else
  echo "== skipped: no nightly toolchain for the docs.rs build (rustup toolchain install nightly)"
fi

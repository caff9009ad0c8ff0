#!/usr/bin/env bash
# What a release would ship, checked without publishing (issue 25):
#   the package's file list (only what a user needs: see `include` in Cargo.toml),
#   `cargo publish --dry-run` with verification (the packaged crate builds on its own),
#   and the docs with warnings as errors (every feature, as docs.rs builds them).
# Needs only the Rust toolchain; no redis-server. Pass --allow-dirty to check an
# uncommitted tree.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cargo package --list"
cargo package --list "$@"
echo "== cargo publish --dry-run"
cargo publish --dry-run "$@"
echo "== cargo doc --all-features --no-deps (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --all-features --no-deps

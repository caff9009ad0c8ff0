#!/usr/bin/env bash
# Compares the public API of both packages with a baseline revision, with
# cargo-semver-checks (installed from crates.io when missing): a change that needs a
# major (or, before 1.0, a minor) version bump is reported with the item it breaks.
#   ./scripts/semver-check.sh            baseline: the latest v* tag, or HEAD~1
#   ./scripts/semver-check.sh <git-rev>  baseline: that revision
# Not part of the test command: it builds the rustdoc of both revisions, and the first
# install compiles the tool (several minutes). See docs/development.md, "Semver".
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo semver-checks --version >/dev/null 2>&1; then
  echo "semver-check: installing cargo-semver-checks from crates.io"
  cargo install cargo-semver-checks --locked
fi
baseline=${1:-$(git describe --tags --abbrev=0 --match 'v*' 2>/dev/null || echo HEAD~1)}
echo "semver-check: against $baseline"
# A baseline from before the protocol core became a package (88aac30) has only redis-locks.
packages=(--workspace)
if ! git cat-file -e "$baseline:protocol/Cargo.toml" 2>/dev/null; then
  packages=(--package redis-locks)
fi
cargo semver-checks check-release "${packages[@]}" --baseline-rev "$baseline" --all-features

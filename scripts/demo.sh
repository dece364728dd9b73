#!/usr/bin/env bash
# Builds trawl and runs its main job: a crawl of the built-in synthetic web.
# Extra arguments go to `trawl demo` (e.g. --hosts 200 --json).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# Built with the tests' feature set (`--tests`), so a machine that ran
# scripts/test.sh reuses its RocksDB build instead of compiling RocksDB's
# C++ a second time (a plain `cargo run` resolves dependency features
# without the dev-dependencies, which rebuilds librocksdb-sys).
cargo build --release --locked --bins --tests
exec "${CARGO_TARGET_DIR:-target}/release/trawl" demo "$@"

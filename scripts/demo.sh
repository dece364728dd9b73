#!/usr/bin/env bash
# Builds trawl and runs its main job: a crawl of the built-in synthetic web.
# Extra arguments go to `trawl demo` (e.g. --hosts 200 --json).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo run --release --locked -- demo "$@"

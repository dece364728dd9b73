#!/usr/bin/env bash
# Runs the whole test suite: formatting, clippy, unit and integration tests
# (the integration tests crawl the synthetic web and check WARC output with
# warcio, which setup installs into a virtualenv; the monitoring test runs
# the Grafana dashboard's queries on a Prometheus that setup installs),
# then every fuzz target briefly on its corpus (cargo-fuzz, which setup
# installs from crates.io).
set -euo pipefail
cd "$(dirname "$0")/.."
export TRAWL_NEED_PYTHON=1
export TRAWL_NEED_PROMETHEUS=1
export TRAWL_NEED_NETNS=1
export TRAWL_NEED_SYSTEMD=1
export TRAWL_NEED_DOCKER=1
export TRAWL_NEED_FUZZ=1
# The multi-host tests (tests/it/cluster_hosts.rs) make network namespaces,
# which needs root: as root they must run (a failure to make one fails
# them); as another user they say they are skipped.
if [ "$(id -u)" = 0 ]; then
  export TRAWL_REQUIRE_NETNS=1
fi
# The container test (tests/it/compose.rs) must run where a Docker engine
# answers; elsewhere it says it is skipped.
if docker info >/dev/null 2>&1; then
  export TRAWL_REQUIRE_DOCKER=1
fi
source scripts/setup.sh
cargo fmt --all -- --check
# Everything builds in release: RocksDB's C++ is compiled once per profile
# (about 15 minutes on two cores), and tests, demo and benches share it.
cargo clippy --release --locked --all-targets -- -D warnings
cargo test --release --locked
# The micro bench (the criterion one) once per benchmark, in test mode
# (~20 s): its setup checks what it measures (a parse cut, a store's
# answers), and a bench that cannot run is found here, not by the next
# person who measures.
cargo test --release --locked --bench micro
# Every fuzz target for 10 s on its committed corpus (fuzz/README.md), with
# libFuzzer's time and memory limits and overflow checks on: a regression
# an input of the corpus once found shows here. Linked against the RocksDB
# the build above compiled, so only Rust is compiled again.
TRAWL_TARGET_DIR="${CARGO_TARGET_DIR:-target}" bash scripts/fuzz.sh smoke 10

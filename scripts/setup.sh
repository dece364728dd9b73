#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test trawl:
# a C++ compiler and libclang (RocksDB is compiled from source, its bindings
# by bindgen), python3-venv for the test helpers (warcio; pywb's CDXJ
# indexer to check trawl's indexes against; schemathesis to fuzz the admin
# API; moto's S3 server, which tests/it/upload.rs uploads WARC files to) and
# Prometheus for the monitoring test (tests/it/monitoring.rs runs the
# dashboard's queries on a real one, and the alert rules' unit tests with
# its promtool). With TRAWL_NEED_NETNS=1, iproute2 (tests/it/cluster_hosts.rs
# and the cluster demo make network namespaces). With TRAWL_NEED_SYSTEMD=1,
# systemd's systemd-analyze (tests/it/cli.rs verifies the service unit).
# With TRAWL_NEED_DOCKER=1, debootstrap and curl, and, where a Docker
# engine answers, the local base image the container test builds trawl's
# image on (scripts/docker-base.sh: no registry is reachable here).
# With TRAWL_NEED_BENCH=1, nginx (with its echo module, for a delayed
# web) and GNU time for the side-by-side bench (benches/sidebyside/run.sh
# serves its web with nginx and measures each crawler with /usr/bin/time).
# With TRAWL_NEED_FUZZ=1, cargo-fuzz (scripts/fuzz.sh builds the fuzz
# targets with it; from crates.io, built here, about a minute). Checks
# first, installs only what is missing. Sourced by demo.sh, test.sh and
# the side-by-side bench.
set -euo pipefail

missing=()
have_pkg() { dpkg -s "$1" >/dev/null 2>&1; }

if command -v dpkg >/dev/null 2>&1; then
  have_pkg libclang-dev || missing+=(libclang-dev)
  command -v c++ >/dev/null 2>&1 || missing+=(g++)
  command -v make >/dev/null 2>&1 || missing+=(make)
  if [ "${TRAWL_NEED_PYTHON:-0}" = 1 ]; then
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
  fi
  if [ "${TRAWL_NEED_NETNS:-0}" = 1 ]; then
    command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2)
  fi
  if [ "${TRAWL_NEED_PROMETHEUS:-0}" = 1 ]; then
    # promtool (the alert rules' tests) comes with it.
    [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ] || missing+=(prometheus)
  fi
  if [ "${TRAWL_NEED_SYSTEMD:-0}" = 1 ]; then
    # systemd-analyze verify checks the shipped service unit.
    [ -x /usr/bin/systemd-analyze ] || missing+=(systemd)
  fi
  if [ "${TRAWL_NEED_DOCKER:-0}" = 1 ]; then
    command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
  fi
  if [ "${TRAWL_NEED_BENCH:-0}" = 1 ]; then
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
    # echo_sleep: the bench's --latency.
    have_pkg libnginx-mod-http-echo || missing+=(libnginx-mod-http-echo)
    [ -x /usr/bin/time ] || missing+=(time)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    # Without recommends: Prometheus would bring (and start) node-exporter.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: not a Debian system; make sure libclang, a C++ compiler, python3 (with venv) and prometheus (nginx and GNU time for the side-by-side bench) are installed" >&2
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install the Rust toolchain (rustup) first" >&2
  exit 1
fi

if [ "${TRAWL_NEED_PYTHON:-0}" = 1 ]; then
  venv="${TRAWL_VENV:-$(pwd)/.venv}"
  if ! "$venv/bin/python" -c 'import warcio, cdxj_indexer, schemathesis, moto.server, pyarrow.parquet' >/dev/null 2>&1; then
    echo "setup: preparing $venv with warcio, cdxj-indexer, schemathesis, moto[server] and pyarrow" >&2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check 'warcio==1.8.1' 'cdxj-indexer==1.5.0' 'schemathesis==4.32.5' 'moto[server]==5.2.5' 'pyarrow==26.0.1'
  fi
  # Tests call these tools through this interpreter.
  export TRAWL_PYTHON="$venv/bin/python"
fi

if [ "${TRAWL_NEED_FUZZ:-0}" = 1 ] && ! cargo fuzz --version >/dev/null 2>&1; then
  echo "setup: installing cargo-fuzz" >&2
  cargo install --quiet --locked cargo-fuzz --version 0.13.2
fi

if [ "${TRAWL_NEED_DOCKER:-0}" = 1 ] && docker info >/dev/null 2>&1; then
  bash "$(dirname "${BASH_SOURCE[0]}")/docker-base.sh"
fi

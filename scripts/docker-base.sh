#!/usr/bin/env bash
# Makes the local base image the container test builds trawl's image on
# (tests/it/compose.rs): these machines reach no container registry, so
# `debian:bookworm-slim` cannot be pulled. debootstrap builds a minimal
# Debian bookworm from Debian's own packages (with ca-certificates, and
# python3 for the test's S3 server), and `docker import` makes it an image.
# The root filesystem's tarball is kept beside the build cache, so a
# machine whose Docker engine was reset imports it again in seconds
# instead of a new debootstrap (about ten minutes).
#
#   bash scripts/docker-base.sh            # makes trawl-test/debian:bookworm if missing
#
# Needs root (debootstrap) and a running Docker engine.
set -euo pipefail

image="${TRAWL_DOCKER_BASE:-trawl-test/debian:bookworm}"
cache="${TRAWL_DOCKER_CACHE:-/var/tmp/trawl-docker}"
tarball="$cache/debian-bookworm-minbase.tar"

if docker image inspect "$image" >/dev/null 2>&1; then
  exit 0
fi
mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
  if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
    echo "docker-base: installing debootstrap" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  root="$(mktemp -d "$cache/rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  echo "docker-base: debootstrap of Debian bookworm into $root (several minutes)" >&2
  PATH="$PATH:/usr/sbin:/sbin" debootstrap --variant=minbase \
    --include=ca-certificates,python3 bookworm "$root" http://deb.debian.org/debian >/dev/null
  # What an image does not need: downloaded packages and lists.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
fi
echo "docker-base: importing $tarball as $image" >&2
docker import "$tarball" "$image" >/dev/null

# trawl's container image.
#
#   docker build -t trawl .      # compiles trawl (RocksDB from source: ~15 min on 2 cores)
#   docker run -v trawl-data:/var/lib/trawl -p 9090:9090 trawl run --seed https://example.org/
#
# Stages: `runtime-base` (a slim Debian with a user of trawl's own and the
# data volume), `prebuilt` (that, with a trawl binary taken from the build
# context's root: `docker build --target prebuilt` where the binary was
# built already, as the container test does), `build` (compiles trawl in
# the dist profile) and `runtime` (the default: the compiled binary on the
# base). RUNTIME_IMAGE and RUST_IMAGE name the base images.
ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${RUNTIME_IMAGE} AS runtime-base
# CA roots for HTTPS (the slim image has none); a user of its own.
RUN set -eux; \
    if [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
        apt-get update; \
        apt-get install -y --no-install-recommends ca-certificates; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    useradd --system --uid 10001 --user-group --home-dir /var/lib/trawl --shell /usr/sbin/nologin trawl; \
    install -d -o trawl -g trawl /var/lib/trawl /etc/trawl /etc/trawl/cluster
# The image's settings (data in the volume, the admin API on every address
# of the container, read-only), read by `trawl run` when no --config is
# given: a command of your own (`trawl run --seed ...`) keeps them.
COPY config/docker/trawl.toml /etc/trawl/trawl.toml
ENV TRAWL_CONFIG=/etc/trawl/trawl.toml
VOLUME ["/var/lib/trawl"]
WORKDIR /var/lib/trawl
EXPOSE 9090
USER trawl
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["trawl", "ctl", "--admin", "127.0.0.1:9090", "status"]
ENTRYPOINT ["trawl"]
CMD ["run"]

FROM runtime-base AS prebuilt
COPY trawl /usr/local/bin/trawl

FROM ${RUST_IMAGE} AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends clang libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --locked --profile dist --bin trawl

FROM runtime-base AS runtime
COPY --from=build /src/target/dist/trawl /usr/local/bin/trawl

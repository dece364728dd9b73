#!/usr/bin/env bash
# Builds and runs trawl's fuzz targets (fuzz/, see fuzz/README.md).
#
#   scripts/fuzz.sh build                      build every target
#   scripts/fuzz.sh run <target> [seconds]     fuzz one target (default 600 s),
#                                              growing fuzz/corpus/<target>
#   scripts/fuzz.sh smoke [seconds]            every target briefly (default
#                                              10 s each) on its corpus, the
#                                              corpus left as it is; CI
#   scripts/fuzz.sh campaign [max] [jobs] [flat]
#                                              fuzz every target (TARGETS, if
#                                              set: those), `jobs` at a time
#                                              (default 1), growing its corpus,
#                                              until its edge coverage has not
#                                              risen for `flat` seconds
#                                              (default 600) or for `max`
#                                              (default 3600); a row of
#                                              figures per target
#   scripts/fuzz.sh cmin [target]              minimise the corpora
#   scripts/fuzz.sh list                       the targets
#
# A crash, a timeout or an out-of-memory input fails the command; its input
# is saved in fuzz/artifacts/<target>/.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). Works on a stable
# toolchain: cargo-fuzz's flags are stable ones without a sanitizer, and
# RUSTC_BOOTSTRAP=1 covers any it passes that are not.
#
# Environment:
#   TRAWL_FUZZ_TARGET_DIR   build directory (default /var/tmp/trawl-fuzz-target)
#   TRAWL_TARGET_DIR        the main build's directory, whose RocksDB static
#                           library is linked instead of compiling RocksDB's
#                           C++ again (default $CARGO_TARGET_DIR, else
#                           /var/tmp/trawl-target, else ./target)
#   FUZZ_TIMEOUT            seconds one input may take (default 10)
#   FUZZ_RSS_MB             memory a run may use (default 2048)
#   FUZZ_MALLOC_MB          largest single allocation (default 512; see
#                           fuzz/README.md for how it is enforced)
#   FUZZ_MAX_LEN            largest input generated (default 16384)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$root/fuzz"
# The main build's directory, before the fuzz build's own replaces it.
main_target_dir="${TRAWL_TARGET_DIR:-${CARGO_TARGET_DIR:-}}"
export CARGO_TARGET_DIR="${TRAWL_FUZZ_TARGET_DIR:-/var/tmp/trawl-fuzz-target}"
export RUSTC_BOOTSTRAP=1
triple="$(rustc -vV | sed -n 's/^host: //p')"
bin_dir="$CARGO_TARGET_DIR/$triple/release"
timeout="${FUZZ_TIMEOUT:-10}"
rss_mb="${FUZZ_RSS_MB:-2048}"
malloc_mb="${FUZZ_MALLOC_MB:-512}"
max_len="${FUZZ_MAX_LEN:-16384}"

targets() {
    sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz/Cargo.toml" | grep -v '^trawl-fuzz$'
}

# Links the RocksDB the main build compiled, when there is one.
use_built_rocksdb() {
    local main_dir lib
    for main_dir in "$main_target_dir" /var/tmp/trawl-target "$root/target"; do
        [ -n "$main_dir" ] || continue
        lib="$(ls "$main_dir"/release/build/librocksdb-sys-*/out/librocksdb.a 2>/dev/null | head -1 || true)"
        if [ -n "$lib" ]; then
            # Absolute: the build runs from fuzz/, and the main build's
            # directory may be given relative to the caller's.
            ROCKSDB_LIB_DIR="$(cd "$(dirname "$lib")" && pwd)"
            export ROCKSDB_LIB_DIR ROCKSDB_STATIC=1
            echo "fuzz: linking RocksDB from $ROCKSDB_LIB_DIR" >&2
            return
        fi
    done
    echo "fuzz: no RocksDB library of a main build found; compiling it" >&2
}

build() {
    use_built_rocksdb
    (cd "$fuzz" && cargo fuzz build --sanitizer none --release --debug-assertions \
        --codegen-units 16 --target-dir "$CARGO_TARGET_DIR" "$@")
}

# libFuzzer's options for every run.
limits() {
    echo "-timeout=$timeout" "-rss_limit_mb=$rss_mb" "-malloc_limit_mb=$malloc_mb" \
        "-max_len=$max_len" "-print_final_stats=1"
}

check_target() {
    targets | grep -qx "$1" || { echo "fuzz: no target $1 (scripts/fuzz.sh list)" >&2; exit 2; }
}

# Fuzzes $1 for $2 seconds: new inputs go to $3, also reading $4...
fuzz_one() {
    local target="$1" seconds="$2" out="$3"
    shift 3
    mkdir -p "$out" "$fuzz/artifacts/$target"
    # One process (no -jobs/-workers): the machines this runs on are shared.
    # shellcheck disable=SC2046
    "$bin_dir/$target" $(limits) -max_total_time="$seconds" \
        -artifact_prefix="$fuzz/artifacts/$target/" "$out" "$@"
}

# The highest edge count in a fuzzer's log so far (0 before the first
# status line).
coverage_in() {
    awk '/ cov: / { for (i = 2; i < NF; i++) if ($i == "cov:" && $(i + 1) + 0 > c) c = $(i + 1) + 0 }
         END { print c + 0 }' "$1"
}

# Fuzzes $1, growing its corpus, until its edge coverage has not risen for
# $3 seconds (a plateau: the fuzzer is stopped with SIGINT, as Ctrl-C
# would, and prints its final statistics) or for at most $2 seconds; then
# prints its campaign row. Coverage is read from the log every 5 seconds,
# so the second it last grew at is known to within 5.
campaign_one() {
    local target="$1" max="$2" flat="$3" log="$4"
    local start pid status=0 cov=0 grew=0 now seen stop="max"
    start="$(date +%s)"
    mkdir -p "$fuzz/corpus/$target" "$fuzz/artifacts/$target"
    # shellcheck disable=SC2046
    "$bin_dir/$target" $(limits) -max_total_time="$max" \
        -artifact_prefix="$fuzz/artifacts/$target/" "$fuzz/corpus/$target" > "$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        now=$(( $(date +%s) - start ))
        seen="$(coverage_in "$log")"
        if [ "$seen" -gt "$cov" ]; then cov="$seen"; grew="$now"; fi
        if [ $(( now - grew )) -ge "$flat" ] && kill -INT "$pid" 2>/dev/null; then
            stop="plateau"
            break
        fi
    done
    wait "$pid" || status=$?
    # libFuzzer exits 72 when interrupted: the plateau stop, not a finding.
    if [ "$stop" = plateau ] && [ "$status" = 72 ]; then status=0; fi
    campaign_row "$target" "$(( $(date +%s) - start ))" "$grew" "$stop" "$log" "$status"
}

# One campaign row: the fuzzer's final statistics and last coverage, the
# run's length, when coverage last grew, and why the run ended.
campaign_row() {
    local target="$1" seconds="$2" grew="$3" stop="$4" log="$5" status="$6"
    awk -v target="$target" -v seconds="$seconds" -v grew="$grew" -v stop="$stop" -v status="$status" '
        /stat::number_of_executed_units:/ { execs = $NF }
        /stat::average_exec_per_sec:/ { rate = $NF }
        /stat::peak_rss_mb:/ { rss = $NF }
        / cov: / {
            for (i = 2; i < NF; i++) {
                if ($i == "cov:" && $(i + 1) + 0 > cov) cov = $(i + 1) + 0
                if ($i == "ft:") ft = $(i + 1) + 0
            }
        }
        END {
            result = (status == 0) ? "clean" : "FINDING (fuzz/artifacts/" target "/)"
            printf "| `%s` | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s |\n",
                target, seconds, execs, rate, cov, ft, rss, grew, seconds - grew, stop, result
        }' "$log"
}

cmd="${1:-}"
shift || true
case "$cmd" in
    build)
        build
        ;;
    list)
        targets
        ;;
    run)
        target="${1:?usage: scripts/fuzz.sh run <target> [seconds]}"
        check_target "$target"
        build "$target"
        fuzz_one "$target" "${2:-600}" "$fuzz/corpus/$target"
        ;;
    smoke)
        seconds="${1:-10}"
        build
        scratch="$(mktemp -d)"
        trap 'rm -rf "$scratch"' EXIT
        failed=()
        for target in $(targets); do
            echo "== $target ($seconds s)" >&2
            if ! fuzz_one "$target" "$seconds" "$scratch/$target" "$fuzz/corpus/$target" \
                2> "$scratch/$target.log"; then
                tail -40 "$scratch/$target.log" >&2
                failed+=("$target")
            else
                grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units)' "$scratch/$target.log" >&2 || true
            fi
        done
        if [ "${#failed[@]}" -gt 0 ]; then
            echo "fuzz smoke: failing targets: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
            exit 1
        fi
        echo "fuzz smoke: every target ran ${seconds} s without a finding" >&2
        ;;
    campaign)
        max="${1:-3600}"
        jobs="${2:-1}"
        flat="${3:-600}"
        build
        logs="$fuzz/artifacts/campaign"
        mkdir -p "$logs"
        echo "| target | s | executions | exec/s | cov | ft | peak RSS MB | cov last grew at s | flat for s | stop | result |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
        for target in ${TARGETS:-$(targets)}; do
            check_target "$target"
            # At most `jobs` fuzzers at once.
            while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
            campaign_one "$target" "$max" "$flat" "$logs/$target.log" &
        done
        wait
        ;;
    cmin)
        build
        for target in ${1:-$(targets)}; do
            check_target "$target"
            dir="$fuzz/corpus/$target"
            minimal="$(mktemp -d)"
            # shellcheck disable=SC2046
            # Edges only (no hit counts): a corpus small enough to commit.
            "$bin_dir/$target" $(limits) -merge=1 -use_counters=0 "$minimal" "$dir" 2> "$minimal.log" \
                || { tail -20 "$minimal.log" >&2; exit 1; }
            before="$(ls "$dir" | wc -l)"
            # Seeds and regression inputs keep their names (they say where
            # they come from); the fuzzer's own finds are replaced by the
            # merge's choice, named by the SHA-1 of their content.
            find "$dir" -type f ! -name 'seed-*' ! -name 'regression-*' -delete
            kept="$(find "$dir" -type f -exec sha1sum {} + | cut -d' ' -f1)"
            for f in "$minimal"/*; do
                [ -e "$f" ] || continue
                grep -qx "$(sha1sum < "$f" | cut -d' ' -f1)" <<< "$kept" || cp "$f" "$dir/"
            done
            rm -rf "$minimal" "$minimal.log"
            echo "fuzz cmin: $target: $before -> $(ls "$dir" | wc -l) files" >&2
        done
        ;;
    *)
        sed -n '2,/^#   scripts\/fuzz.sh list/p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac

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
#                                              (default 600; FUZZ_PLATEAU=own:
#                                              trawl's own edges) or for `max`
#                                              (default 3600); a row of
#                                              figures per target (needs
#                                              python3 and llvm-symbolizer,
#                                              Debian's llvm)
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
#   FUZZ_PLATEAU            what a campaign's plateau counts: all (every
#                           edge, the default) or own (trawl's own code's)
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

# The dictionaries (fuzz/dicts/) of target $1: words its input is made of
# that the fuzzer cannot learn from comparisons (fuzz/README.md).
dicts_of() {
    case "$1" in
        html_stream | html_tree) echo html ;;
        response_head) echo http html ;;
    esac
}

# libFuzzer's -dict option for target $1 (it takes one file, so a target's
# dictionaries are joined into one in the build directory), or nothing.
dict_option() {
    local names joined name
    names="$(dicts_of "$1")"
    [ -n "$names" ] || return 0
    joined="$CARGO_TARGET_DIR/dicts/$1.dict"
    mkdir -p "$(dirname "$joined")"
    for name in $names; do cat "$fuzz/dicts/$name.dict"; done > "$joined"
    echo "-dict=$joined"
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
    "$bin_dir/$target" $(limits) $(dict_option "$target") -max_total_time="$seconds" \
        -artifact_prefix="$fuzz/artifacts/$target/" "$out" "$@"
}

# Fuzzes $1, growing its corpus, until its coverage has levelled off
# (scripts/fuzz_watch.py: no new edge for $3 seconds, counting every edge
# or, with FUZZ_PLATEAU=own, trawl's own) or for at most $2 seconds; prints
# its campaign row.
campaign_one() {
    local target="$1" max="$2" flat="$3" log="$4"
    mkdir -p "$fuzz/corpus/$target" "$fuzz/artifacts/$target"
    # shellcheck disable=SC2046
    python3 "$root/scripts/fuzz_watch.py" --target "$target" --max "$max" --flat "$flat" \
        --plateau "${FUZZ_PLATEAU:-all}" --log "$log" -- \
        "$bin_dir/$target" $(limits) $(dict_option "$target") \
        -artifact_prefix="$fuzz/artifacts/$target/" "$fuzz/corpus/$target"
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
        echo "| target | s | executions | exec/s | cov | ft | new edges in trawl | peak RSS MB | cov last grew at s | trawl's last grew at s | stop | new edges while fuzzing, by crate | in the last flat s | result |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"
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

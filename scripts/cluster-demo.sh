#!/usr/bin/env bash
# Three trawl nodes on loopback crawl the synthetic web as one cluster
# (config/cluster/node{1,2,3}.toml), sharing one data directory. Seeds go
# to node 1 only; the nodes split the partitions between them, pass links
# to each other over the bridge, and all stop once the whole cluster is
# idle. Prints what each node fetched and checks the union against the
# web's ground truth. Extra arguments go to `trawl testweb`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --locked --bins --tests
bin="${CARGO_TARGET_DIR:-target}/release/trawl"
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

"$bin" testweb --listen 127.0.0.1:8099 --hosts 60 --pages-per-host 20 --plain \
  --seeds-out "$work/seeds" --truth-out "$work/truth" "$@" > "$work/testweb.out" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/truth" ] && break; sleep 0.1; done

for n in 1 2 3; do
  seeds=()
  [ "$n" = 1 ] && seeds=(--seeds "$work/seeds")
  RUST_LOG="${RUST_LOG:-warn}" "$bin" run --config "config/cluster/node$n.toml" \
    --data "$work/data" --until-idle "${seeds[@]}" > "$work/node$n.log" 2>&1 &
  pids+=($!)
done
status=0
for i in 1 2 3; do wait "${pids[$i]}" || status=$?; done
[ "$status" = 0 ] || { echo "a node failed:"; tail -n 20 "$work"/node*.log; exit 1; }

python3 - "$work" <<'PY'
import json, sys, pathlib
work = pathlib.Path(sys.argv[1])
truth = set(l for l in (work / "truth").read_text().split("\n") if l)
fetched = {}
for n in (1, 2, 3):
    path = work / "data" / f"events-n{n}.jsonl"
    urls = [json.loads(l)["url"] for l in path.read_text().splitlines()
            if json.loads(l)["kind"] == "page"] if path.exists() else []
    fetched[n] = urls
    print(f"node n{n}: {len(urls)} pages")
union = [u for urls in fetched.values() for u in urls]
pages = set(union)
missing, extra = truth - pages, pages - truth
print(f"cluster: {len(pages)} distinct pages of {len(truth)} in the ground truth, "
      f"{len(union) - len(pages)} fetched twice")
if missing or extra:
    print(f"missing {len(missing)}, extra {len(extra)}")
    sys.exit(1)
print("the cluster fetched exactly the ground truth")
PY

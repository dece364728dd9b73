#!/usr/bin/env bash
# Three trawl nodes on hosts of their own crawl the synthetic web as one
# cluster, and one of them is lost with its disk half-way.
#
# The hosts are network namespaces of this machine, joined by a switch
# (another namespace with a Linux bridge): n1, n2, n3 at 198.18.250.11-13,
# each with a data directory of its own; the synthetic web (`trawl
# testweb`) and an S3 server (moto) at 198.18.250.254, this shell's leg
# into the switch. 198.18.0.0/15 is the range RFC 2544 reserves for test
# networks. Configs: config/cluster/node{1,2,3}.toml ([cluster] state_url
# and [upload] on the S3 server). Everything is removed at the end.
#
# Usage: sudo bash scripts/cluster-demo.sh [--fault kill|pause|cut|none]
#        [trawl testweb arguments...]
#   kill  (default) n2 is killed (SIGKILL) 4 s in and its data directory
#         deleted: a reclaimed spot instance;
#   pause n2 is stopped (SIGSTOP) for 12 s (three leases), then continued;
#   cut   n2 is cut off from everything for 12 s, then healed;
#   none  no fault.
# Then it checks, from the web server's audit and the bucket: every page of
# the ground truth archived in object storage, never two requests in
# flight to one host.
# Needs root (network namespaces) and iproute2.
set -euo pipefail
cd "$(dirname "$0")/.."

fault=kill
if [ "${1:-}" = "--fault" ]; then
  fault="${2:?--fault needs kill, pause, cut or none}"
  shift 2
fi
case "$fault" in kill|pause|cut|none) ;; *) echo "unknown fault: $fault" >&2; exit 2 ;; esac
if [ "$(id -u)" != 0 ]; then
  echo "cluster-demo: needs root (it makes network namespaces)" >&2
  exit 1
fi

export TRAWL_NEED_PYTHON=1 TRAWL_NEED_NETNS=1
source scripts/setup.sh
cargo build --release --locked --bins
bin="$(pwd)/${CARGO_TARGET_DIR:-target}/release/trawl"
case "${CARGO_TARGET_DIR:-}" in /*) bin="$CARGO_TARGET_DIR/release/trawl" ;; esac
python="$TRAWL_PYTHON"

net=198.18.250
tag=trawldemo
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in 1 2 3; do ip netns del "${tag}n$n" 2>/dev/null || true; done
  ip netns del "${tag}sw" 2>/dev/null || true
  ip link del "${tag}t" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The switch, this shell's leg, and one namespace per node.
ip netns add "${tag}sw"
ip -n "${tag}sw" link add br0 type bridge
ip -n "${tag}sw" link set br0 up
ip link add "${tag}t" type veth peer name "${tag}pt"
ip link set "${tag}pt" netns "${tag}sw"
ip -n "${tag}sw" link set "${tag}pt" master br0 up
ip addr add "$net.254/24" dev "${tag}t"
ip link set "${tag}t" up
for n in 1 2 3; do
  ns="${tag}n$n"
  ip netns add "$ns"
  ip link add "${tag}e$n" type veth peer name "${tag}p$n"
  ip link set "${tag}e$n" netns "$ns"
  ip link set "${tag}p$n" netns "${tag}sw"
  ip -n "${tag}sw" link set "${tag}p$n" master br0 up
  ip -n "$ns" addr add "$net.1$n/24" dev "${tag}e$n"
  ip -n "$ns" link set "${tag}e$n" up
  ip -n "$ns" link set lo up
done

"$bin" testweb --listen "$net.254:8099" --hosts 30 --pages-per-host 50 --plain \
  --seeds-out "$work/seeds" --truth-out "$work/truth" "$@" > "$work/testweb.out" &
web=$!
pids+=("$web")
"$python" -m moto.server -H "$net.254" -p 5099 > "$work/moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
  [ -s "$work/truth" ] && "$python" - "$net" <<'PY' 2>/dev/null && break
import sys, urllib.request
req = urllib.request.Request(f"http://{sys.argv[1]}.254:5099/trawl", method="PUT")
urllib.request.urlopen(req, timeout=1)
PY
  sleep 0.2
done

# The cluster's credentials: a CA, each node's certificate and key, the
# gossip key; each node's config gets a layer naming its files.
"$bin" cluster certs --out "$work/certs" --cluster-id demo n1 n2 n3 > /dev/null 2>&1
for n in 1 2 3; do
  printf '[cluster]\ntls_ca = "%s"\ntls_cert = "%s"\ntls_key = "%s"\ngossip_key = "%s"\n' \
    "$work/certs/ca.pem" "$work/certs/n$n.pem" "$work/certs/n$n.key" "$work/certs/gossip.key" \
    > "$work/auth-n$n.toml"
done

node_pids=()
for n in 1 2 3; do
  seeds=()
  [ "$n" = 1 ] && seeds=(--seeds "$work/seeds")
  NO_COLOR=1 RUST_LOG="${RUST_LOG:-warn,trawl::actors::ownership=info}" \
    ip netns exec "${tag}n$n" "$bin" run --config "config/cluster/node$n.toml" \
    --config "$work/auth-n$n.toml" \
    --data "$work/n$n" --until-idle "${seeds[@]}" > "$work/node$n.log" 2>&1 &
  node_pids+=($!)
  pids+=($!)
done

sleep 4
n2="${node_pids[1]}"
case "$fault" in
  kill)
    echo "fault: n2 killed, its data directory deleted"
    kill -KILL "$n2" 2>/dev/null || { echo "n2 had already finished:"; tail -n 5 "$work/node2.log"; exit 1; }
    wait "$n2" 2>/dev/null || true
    rm -rf "$work/n2" ;;
  pause)
    echo "fault: n2 stopped for 12 s"
    kill -STOP "$n2"; sleep 12; kill -CONT "$n2" ;;
  cut)
    echo "fault: n2 cut off for 12 s"
    ip -n "${tag}sw" link set "${tag}p2" down; sleep 12; ip -n "${tag}sw" link set "${tag}p2" up ;;
  none) ;;
esac

status=0
for i in 0 1 2; do
  if ! wait "${node_pids[$i]}"; then
    [ "$fault" = kill ] && [ "$i" = 1 ] && continue
    status=1
  fi
done
[ "$status" = 0 ] || { echo "a node failed:"; tail -n 20 "$work"/node*.log; exit 1; }
kill -TERM "$web"; wait "$web" || true
for n in 1 2 3; do
  log="$work/node$n.log"
  echo "n$n: $(grep -c "partition claimed" "$log") claims, $(grep -c "partition restored from its chain" "$log") restores from a chain, $(grep -c "stopped fetching\|another node took" "$log") partitions stopped by a lapsed lease or a fence"
done

"$python" - "$work" "$net" <<'PY'
import io, sys, pathlib, boto3
from warcio.archiveiterator import ArchiveIterator
work, net = pathlib.Path(sys.argv[1]), sys.argv[2]
truth = set(l for l in (work / "truth").read_text().split("\n") if l)
s3 = boto3.client("s3", endpoint_url=f"http://{net}.254:5099", region_name="us-east-1",
                  aws_access_key_id="demo", aws_secret_access_key="demo")
archived, files = set(), 0
for page in s3.get_paginator("list_objects_v2").paginate(Bucket="trawl", Prefix="warcs/"):
    for obj in page.get("Contents", []):
        if not obj["Key"].endswith(".warc.gz"):
            continue
        files += 1
        body = s3.get_object(Bucket="trawl", Key=obj["Key"])["Body"].read()
        for record in ArchiveIterator(io.BytesIO(body)):
            if record.rec_type in ("response", "revisit"):
                archived.add(record.rec_headers.get_header("WARC-Target-URI"))
chains = set()
for page in s3.get_paginator("list_objects_v2").paginate(Bucket="trawl", Prefix="state/partitions/"):
    chains |= {o["Key"].split("/")[2] for o in page.get("Contents", [])}
missing = truth - archived
print(f"object storage: {files} WARC files holding {len(archived & truth)} of the "
      f"{len(truth)} pages of the ground truth; {len(chains)} partition chains")
if missing:
    print(f"missing {len(missing)}: {sorted(missing)[:5]}")
    sys.exit(1)
print("every page of the ground truth is archived in object storage")
PY
"$python" - "$work/testweb.out" <<'PY'
import json, sys
report = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(f"web server: {report['requests']} requests, at most {report['max_concurrent']} at once "
      f"to one host, {len(report['violations'])} politeness violations")
sys.exit(1 if report["violations"] else 0)
PY

#!/usr/bin/env bash
# Side-by-side bench: trawl and spider-rs crawl the same static web, served
# by nginx on loopback addresses, one after the other in one run.
#
# usage: benches/sidebyside/run.sh [--hosts 500] [--pages 40] [--size 15000] [--runs 1]
#          [--latency MS | --latency-mix] [--gzip] [--only trawl|spider-rs] [--trawl-settings FILE]
#          [--profile dist] [--trawl-bin PATH] [--trawl-wrap 'CMD ...']
#
# --latency delays every response (robots.txt included) by MS
# milliseconds before nginx serves it (the echo module's `echo_sleep`,
# which waits on a timer, not on a worker), as the real web's round trips
# and server time do: the crawler's job then is to keep enough requests in
# flight, one per host at a time. 0 (the default): served at once.
# --latency-mix gives each host a delay of its own, a heavy tail: nine
# hosts in ten 50-200 ms, one in ten 1-3 s (drawn from a fixed seed by
# awk, in hosts.txt's order: the same web for both crawlers); and faults:
# on one host in a hundred the pages numbered ...7 (4 of 40) reset the
# connection (nginx's 444) when asked on a connection that served a
# request before, on another one in a hundred they stall 25 s there (past
# trawl's 20 s first-byte timeout). Asked again on a new connection, they
# are served: a crawler that retries gets every page.
#
# --gzip writes a gzip copy of every page beside it (level 9, made once
# before the runs) and serves it, with Content-Encoding: gzip, to a crawler
# that asks (nginx's gzip_static: no compression on the shared cores while
# the crawlers run). The table's wire_KB/p is the body bytes nginx sent
# per page, compressed or not.
#
# --profile is the cargo profile both crawlers are built in: `dist` (the
# default: release with fat LTO and one codegen unit, the build to deploy;
# spider-bench defines the same profile) or `release` (what the tests and
# the demo use: no LTO, 16 codegen units).
#
# --only runs one of the two (no ratio is printed); --trawl-settings
# layers a TOML file over trawl's bench settings (to compare a setting:
# `[storage] partitions = 16`, say); --trawl-bin runs that trawl binary
# instead of building one (to compare two builds against the same
# spider-rs runs: copy each build's binary aside, run once per binary).
# --trawl-wrap puts a command in front of trawl, to profile the crawl
# (word-split; `{out}` becomes the run's output directory):
#   --trawl-wrap 'perf record -F 499 --call-graph dwarf,16384 -o {out}/perf.data --'
#   --trawl-wrap 'perf stat -e task-clock,syscalls:sys_enter_write -o {out}/perf-stat.txt --'
# time -v then measures the wrapper too: read the ratios of such runs as
# a profile's context, not as figures.
#
# The web: HOSTS IP-literal hosts 127.0.1.1, 127.0.1.2, ... (loopback only)
# of PAGES pages of about SIZE bytes each, robots.txt allow-all on every
# host (gen_web.py). Both crawlers: one request in flight per host, no
# delay, robots.txt respected. trawl runs with its defaults plus
# `allow_addresses = ["127.0.0.0/8"]`, `min_delay = "0s"`,
# `delay_factor = 0.0` and `max_depth = 0`, and archives every page to
# WARC; spider-rs (the version pinned in spider-bench/Cargo.toml and
# Cargo.lock) stores nothing.
#
# Each crawler runs under /usr/bin/time -v: wall time from process start to
# exit, CPU (user+sys), peak RSS. Pages are counted from nginx's access log
# (status 200, robots.txt apart), the same way for both. While trawl runs,
# its /metrics is read every 250 ms for trawl_pipeline_backlog_pages (pages
# fetched and not yet archived) and the peaks trawl records
# (trawl_pipeline_backlog_peak_pages, and trawl_pipeline_peak_pages: pages
# holding a place in the pipeline, at most [fetch] max_pipeline_pages).
#
# Output: the table on stdout (the ratios run by run and, over two or
# more runs, their median and range), and under
# $CARGO_TARGET_DIR/sidebyside/results-<time>/: results.jsonl (one line per
# crawler and run), table.txt, backlog-run<N>.csv (one line per second:
# elapsed, pages fetched, pages archived, backlog max, frontier size), and
# each run's time -v output, stdout and stderr, nginx-cpu.txt (the CPU
# seconds nginx's workers spent while that crawler ran, from their
# /proc/<pid>/stat: the server's share of the shared cores), and for trawl
# the last /metrics text read before it exited (metrics.txt: stage times,
# handover sizes, the store's batches).
set -euo pipefail

hosts=500 pages=40 size=15000 runs=1 latency=0 mix=0 gzip=0 only="" settings="" profile=dist trawl_bin="" trawl_wrap=""
while [ $# -gt 0 ]; do
  case $1 in
  --hosts) hosts=$2; shift 2 ;;
  --pages) pages=$2; shift 2 ;;
  --size) size=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --latency) latency=$2; shift 2 ;;
  --latency-mix) mix=1; shift ;;
  --gzip) gzip=1; shift ;;
  --only) only=$2; shift 2 ;;
  --profile) profile=$2; shift 2 ;;
  --trawl-wrap) trawl_wrap=$2; shift 2 ;;
  --trawl-bin) trawl_bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
  --trawl-settings) settings=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
  -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Loopback only: neither crawler goes through a proxy the environment names.
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
TRAWL_NEED_BENCH=1 source scripts/setup.sh
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

target=${CARGO_TARGET_DIR:-$root/target}
mkdir -p "$target"
target=$(cd "$target" && pwd)
work=$target/sidebyside
out=$work/results-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"

echo "== building trawl and spider-bench (profile $profile)" >&2
if [ -z "$trawl_bin" ]; then
  cargo build --profile "$profile" --locked --bin trawl
  trawl_bin=$target/$profile/trawl
fi
if [ "$only" != trawl ]; then
  cargo build --profile "$profile" --locked --manifest-path "$here/spider-bench/Cargo.toml" \
    --target-dir "$target/spider-bench"
fi
spider_bin=$target/spider-bench/$profile/spider-bench

port=$(python3 "$here/bench.py" port)
admin_port=$(python3 "$here/bench.py" port)
web=$work/web
echo "== generating the web: $hosts hosts x $pages pages, port $port" >&2
rm -rf "$web"
python3 "$here/gen_web.py" "$web" --hosts "$hosts" --pages "$pages" --size "$size" --port "$port" >&2
if [ "$gzip" = 1 ]; then
  find "$web" -name '*.html' -exec gzip -9 -k -n {} +
fi

# nginx: one listen socket per host address (loopback only), the document
# root chosen by the Host header, one access log line per request written
# at once (unbuffered) so a run's lines are all there when it exits.
ngx=$work/nginx
rm -rf "$ngx"; mkdir -p "$ngx/logs" "$ngx/tmp"
echo_module=/usr/lib/nginx/modules/ngx_http_echo_module.so
{
  if [ "$latency" -gt 0 ] || [ "$mix" = 1 ]; then echo "load_module $echo_module;"; fi
  echo "worker_processes 2;"
  # Workers run as the user running the bench, so they can read the web.
  [ "$(id -u)" = 0 ] && echo "user root;"
  echo "pid $ngx/nginx.pid;"
  echo "error_log $ngx/logs/error.log warn;"
  echo "events { worker_connections 16384; multi_accept on; }"
  echo "http {"
  echo "  types { text/html html; text/plain txt; }"
  echo "  default_type application/octet-stream;"
  echo "  log_format bench '\$msec \$host \"\$request\" \$status \$body_bytes_sent \$request_time';"
  echo "  access_log $ngx/logs/access.log bench;"
  for d in client_body proxy fastcgi uwsgi scgi; do echo "  ${d}_temp_path $ngx/tmp/$d;"; done
  echo "  sendfile on; tcp_nopush on; tcp_nodelay on;"
  echo "  keepalive_timeout 65; keepalive_requests 1000000;"
  echo "  server_tokens off;"
  if [ "$mix" = 1 ]; then
    echo "  map \$host \$delay {"
    awk 'BEGIN { srand(34) } {
      slow = rand() < 0.1
      printf "    %s %.3f;\n", $1, slow ? 1 + 2 * rand() : 0.05 + 0.15 * rand()
    }' "$web/hosts.txt"
    echo "  }"
    # The faulty hosts: their pages numbered ...7 (4 of 40), when asked on
    # a connection that served a request before, reset it (nginx's 444:
    # closed, no answer) or stall 25 s, past trawl's first-byte timeout
    # (20 s): what servers that drop idle keep-alive connections, or choke
    # now and then, do. A retry on a new connection is served.
    echo "  map \$host \$fault {"
    echo "    default ok;"
    awk 'BEGIN { srand(35) } {
      r = rand()
      if (r < 0.01) printf "    %s reset;\n", $1
      else if (r < 0.02) printf "    %s stall;\n", $1
    }' "$web/hosts.txt"
    echo "  }"
    echo "  map \$fault:\$connection_requests:\$uri \$wait { \"~^stall:([2-9]|[0-9][0-9]+):/p/[0-9]*7\\.html\$\" 25; default \$delay; }"
    echo "  map \$fault:\$connection_requests:\$uri \$reset { \"~^reset:([2-9]|[0-9][0-9]+):/p/[0-9]*7\\.html\$\" 1; default 0; }"
  elif [ "$latency" -gt 0 ]; then
    echo "  map \$host \$wait { default $(awk -v ms="$latency" 'BEGIN { printf "%.3f", ms / 1000 }'); }"
    echo "  map \$host \$reset { default 0; }"
  fi
  echo "  server {"
  while read -r ip; do echo "    listen $ip:$port backlog=4096;"; done < "$web/hosts.txt"
  echo "    root $web/\$host;"
  echo "    index index.html;"
  [ "$gzip" = 1 ] && echo "    gzip_static on; gzip_vary on;"
  if [ "$latency" -gt 0 ] || [ "$mix" = 1 ]; then
    # Wait, then serve the file (or the directory's index.html) from a
    # named location, so the wait is not taken twice.
    echo "    location / { if (\$reset) { return 444; } echo_sleep \$wait; echo_exec @file; }"
    echo "    location @file { try_files \$uri \$uri/index.html =404; }"
  fi
  echo "  }"
  echo "}"
} > "$ngx/nginx.conf"
"$nginx_bin" -e "$ngx/logs/error.log" -t -q -c "$ngx/nginx.conf" -p "$ngx/"
"$nginx_bin" -e "$ngx/logs/error.log" -c "$ngx/nginx.conf" -p "$ngx/"
stop_nginx() {
  [ -s "$ngx/nginx.pid" ] && "$nginx_bin" -e "$ngx/logs/error.log" -c "$ngx/nginx.conf" -p "$ngx/" -s stop || true
}
trap stop_nginx EXIT
python3 "$here/bench.py" wait "$(head -1 "$web/seeds.txt")"
access=$ngx/logs/access.log
expected=$((hosts * pages))

# CPU clock ticks (user + system) nginx's workers (the master's children)
# have used so far, from /proc/<pid>/stat.
nginx_ticks() {
  local master total=0 stat fields
  master=$(cat "$ngx/nginx.pid")
  for stat in /proc/[0-9]*/stat; do
    read -r -a fields < "$stat" 2>/dev/null || continue
    [ "${fields[3]}" = "$master" ] && total=$((total + fields[13] + fields[14]))
  done
  echo "$total"
}

# One crawler's run under GNU time; its slice of the access log is the lines
# added while it ran.
measure() { # LABEL RUN CMD...
  local label=$1 run=$2; shift 2
  local dir=$out/$label-run$run
  mkdir -p "$dir"
  local before; before=$(wc -l < "$access")
  local ticks_before; ticks_before=$(nginx_ticks)
  date +%s.%N > "$dir/clock.txt"
  /usr/bin/time -v -o "$dir/time.txt" "$@" > "$dir/stdout" 2> "$dir/stderr" &
  local pid=$!
  local sampled=""
  if [ "$label" = trawl ]; then
    python3 "$here/bench.py" sample "http://127.0.0.1:$admin_port/metrics" "$pid" \
      "$out/backlog-run$run.csv" "$dir/metrics.txt" > "$dir/backlog.json" &
    sampled=$!
  fi
  local status=0
  wait "$pid" || status=$?
  date +%s.%N >> "$dir/clock.txt"
  [ -n "$sampled" ] && wait "$sampled"
  tail -n +"$((before + 1))" "$access" > "$dir/access.log"
  awk -v ticks="$(($(nginx_ticks) - ticks_before))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f\n", ticks / hz }' > "$dir/nginx-cpu.txt"
  [ "$status" = 0 ] || echo "$label run $run exited with status $status (see $dir/stderr)" >&2
  python3 "$here/bench.py" stats "$label" "$run" "$expected" "$dir/time.txt" "$dir/access.log" \
    "$dir/clock.txt" ${sampled:+"$dir/backlog.json"} >> "$out/results.jsonl"
}

latency_label="${latency} ms"
[ "$mix" = 1 ] && latency_label="mix (90 % 50-200 ms, 10 % 1-3 s; 1 % of hosts reset and 1 % stall 25 s on pages *7 asked on a reused connection)"
[ "$gzip" = 1 ] && latency_label="$latency_label, gzip served when asked"
data=$work/trawl-data
cat > "$out/trawl.toml" <<TOML
# The side-by-side bench's settings, layered on trawl's defaults.
[crawl]
max_depth = 0
[fetch]
allow_addresses = ["127.0.0.0/8"]
[politeness]
min_delay = "0s"
delay_factor = 0.0
[admin]
listen = "127.0.0.1:$admin_port"
TOML
[ -n "$settings" ] && python3 "$here/bench.py" merge "$out/trawl.toml" "$settings"

for run in $(seq "$runs"); do
  if [ "$only" != trawl ]; then
    echo "== run $run/$runs: spider-rs" >&2
    measure spider-rs "$run" "$spider_bin" "$web/seeds.txt"
  fi
  if [ "$only" != spider-rs ]; then
    echo "== run $run/$runs: trawl" >&2
    rm -rf "$data"
    # shellcheck disable=SC2086 # the wrapper is word-split on purpose
    measure trawl "$run" ${trawl_wrap//\{out\}/$out/trawl-run$run} "$trawl_bin" run --config "$out/trawl.toml" --until-idle \
      --seeds "$web/seeds.txt" --data "$data"
    rm -rf "$data"
  fi
done

{
  echo "side-by-side: $hosts hosts x $pages pages of ~$size bytes ($expected pages), latency ${latency_label}, profile $profile, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
  python3 "$here/bench.py" table "$out/results.jsonl"
  echo
  echo "trawl's backlog over time: $out/backlog-run*.csv"
} | tee "$out/table.txt"

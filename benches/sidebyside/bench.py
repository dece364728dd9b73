#!/usr/bin/env python3
"""Helpers of run.sh: sample trawl's backlog, summarise a run, print the table.

usage:
  bench.py port
      prints a free TCP port on the loopback address 127.0.1.1
  bench.py wait URL
      waits (up to 5 s) until URL answers 200; fails otherwise
  bench.py sample URL PID CSV
      reads trawl's /metrics at URL every 250 ms while process PID lives;
      writes CSV (one line per second: elapsed, pages fetched, pages
      archived, backlog max within that second, frontier) and prints one
      JSON line: {"backlog_max": .., "pipeline_max": .., "samples": ..};
      the maxima include the peaks trawl records itself
      (trawl_pipeline_backlog_peak_pages, trawl_pipeline_peak_pages), so a
      peak between two samples is not missed
  bench.py stats LABEL RUN EXPECTED TIME_TXT ACCESS_SLICE CLOCK_TXT [SAMPLE_JSON]
      prints one JSON line for one crawler's run: pages (status 200 from the
      nginx access log, robots.txt apart), wall, CPU, peak RSS, ..., and
      where the wall time went (see `timeline`); CLOCK_TXT holds the
      epoch seconds the process was started and seen to exit
  bench.py table RESULTS_JSONL
      prints the side-by-side table and the ratios trawl/spider-rs
  bench.py merge BASE_TOML EXTRA_TOML
      rewrites BASE_TOML with EXTRA_TOML's settings layered on top (tables
      merged key by key)
"""
import json
import os
import re
import socket
import statistics
import sys
import time
import urllib.request

INTERVAL = 0.25
# Loopback only: never through a proxy the environment may name.
OPEN = urllib.request.build_opener(urllib.request.ProxyHandler({})).open


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.1.1", 0))
        return s.getsockname()[1]


def wait(url):
    # A web with --latency answers each request that much later: a try
    # waits for longer than any latency the bench is run with.
    deadline = time.monotonic() + 15.0
    while True:
        try:
            with OPEN(url, timeout=10.0) as r:
                if r.status == 200:
                    return
        except OSError as e:
            if time.monotonic() > deadline:
                sys.exit("%s does not answer: %s" % (url, e))
        time.sleep(0.1)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) has finished its crawl.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


METRIC = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def scrape(url):
    """The sums of the series the backlog report needs, and the text read."""
    with OPEN(url, timeout=1.0) as r:
        text = r.read().decode()
    got = {"fetched": 0.0, "archived": 0.0, "backlog": 0.0, "frontier": 0.0,
           "backlog_peak": 0.0, "pipeline_peak": 0.0}
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "trawl_pages_total":
            got["fetched"] += value
        elif name == "trawl_stage_seconds_count" and 'stage="archive"' in labels:
            got["archived"] += value
        elif name == "trawl_pipeline_backlog_pages":
            got["backlog"] = value
        elif name == "trawl_frontier_size":
            got["frontier"] = value
        elif name == "trawl_pipeline_backlog_peak_pages":
            got["backlog_peak"] = value
        elif name == "trawl_pipeline_peak_pages":
            got["pipeline_peak"] = value
    return got, text


def sample(url, pid, csv_path, metrics_path):
    """Samples /metrics until `pid` exits; the last text read is kept in
    `metrics_path` (the run's histograms: stage times, handover sizes)."""
    t0 = time.monotonic()
    rows, current, samples, peak, pipeline = [], None, 0, 0, 0
    last = None
    while alive(pid):
        tick = time.monotonic()
        try:
            got, last = scrape(url)
        except OSError:
            got = None  # not listening yet, or shutting down
        elapsed = tick - t0
        if got is not None:
            samples += 1
            peak = max(peak, int(got["backlog"]), int(got["backlog_peak"]))
            pipeline = max(pipeline, int(got["pipeline_peak"]))
            second = int(elapsed)
            if current is None or current[0] != second:
                if current is not None:
                    rows.append(current)
                current = [second, 0, 0, 0, 0]
            current[1] = int(got["fetched"])
            current[2] = int(got["archived"])
            current[3] = max(current[3], int(got["backlog"]))
            current[4] = int(got["frontier"])
        time.sleep(max(0.0, INTERVAL - (time.monotonic() - tick)))
    if current is not None:
        rows.append(current)
    with open(csv_path, "w") as f:
        f.write("elapsed_s,pages_fetched,pages_archived,backlog_max,frontier\n")
        for r in rows:
            f.write("%d,%d,%d,%d,%d\n" % tuple(r))
    if last is not None:
        with open(metrics_path, "w") as f:
            f.write(last)
    print(json.dumps({"backlog_max": peak, "pipeline_max": pipeline, "samples": samples}))


def parse_time(path):
    t = {}
    for line in open(path, errors="replace"):
        k, _, v = line.strip().rpartition(": ")
        t[k] = v
    wall = 0.0
    for part in t.get("Elapsed (wall clock) time (h:mm:ss or m:ss)", "0:0").split(":"):
        wall = wall * 60 + float(part)
    return {
        "wall_s": wall,
        "cpu_s": float(t.get("User time (seconds)", 0)) + float(t.get("System time (seconds)", 0)),
        "peak_rss_mb": int(t.get("Maximum resident set size (kbytes)", 0)) / 1024,
        "exit": int(t.get("Exit status", -1)),
    }


LOG = re.compile(r'^\S+ \S+ "(\S+) (\S+) [^"]*" (\d+) (\d+)')
# The same line with the time it was logged (the response sent) and how
# long the request took (from its first byte read): its start and end.
TIMED = re.compile(r'^(\d+\.\d+) (\S+) "\S+ (\S+) [^"]*" \d+ \d+ (\d+\.\d+)')


def quantile(values, q):
    """The q-quantile of values (nearest rank), None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timeline(access, started, exited):
    """Where a run's wall time went, host by host, from nginx's access log.

    Each host's requests in the order they started (robots.txt first, then
    its seed page, then the rest); a gap is the time from one response of
    a host to its next request. The bound is the longest host's time on
    the wire (the sum of its requests' times): a crawler holding one
    request per host can end no sooner. Returns milliseconds:
    start (process start to a host's first request: median and last
    host), gap_robots, gap_seed (median over hosts of the gap after
    robots.txt and after the first page), gap_other (median and p90 of the
    others), idle_cycles (gaps as long as the host's median request time,
    per thousand gaps), stop (last response to exit), bound_s and
    over_bound (wall / bound - 1).
    """
    hosts = {}
    for line in open(access, errors="replace"):
        m = TIMED.match(line)
        if not m:
            continue
        end, host, path, took = float(m[1]), m[2], m[3], float(m[4])
        hosts.setdefault(host, []).append((end - took, end, path))
    if not hosts or not started or not exited:
        return {}
    firsts, after_robots, after_seed, others, lengths = [], [], [], [], []
    idle = gaps = 0
    for reqs in hosts.values():
        reqs.sort()
        firsts.append(reqs[0][0] - started)
        lengths.append(sum(end - start for start, end, _ in reqs))
        typical = statistics.median(end - start for start, end, _ in reqs)
        for i in range(1, len(reqs)):
            gap = max(0.0, reqs[i][0] - reqs[i - 1][1])
            gaps += 1
            idle += gap >= typical > 0
            if reqs[i - 1][2] == "/robots.txt":
                after_robots.append(gap)
            elif i == 2:
                after_seed.append(gap)
            else:
                others.append(gap)
    last = max(end for reqs in hosts.values() for _, end, _ in reqs)
    bound = max(lengths)
    ms = lambda v: None if v is None else round(v * 1000, 1)
    return {
        "start_ms": ms(quantile(firsts, 0.5)), "start_last_ms": ms(max(firsts)),
        "gap_robots_ms": ms(quantile(after_robots, 0.5)),
        "gap_seed_ms": ms(quantile(after_seed, 0.5)),
        "gap_other_ms": ms(quantile(others, 0.5)), "gap_other_p90_ms": ms(quantile(others, 0.9)),
        "idle_cycles_permille": round(1000 * idle / gaps, 1) if gaps else None,
        "stop_ms": ms(exited - last), "bound_s": round(bound, 3),
        "over_bound": round((exited - started) / bound - 1, 4) if bound else None,
    }


def stats(label, run, expected, time_txt, access, clock_txt, sample_json=None):
    pages = robots = other = page_bytes = 0
    for line in open(access, errors="replace"):
        m = LOG.match(line)
        if not m:
            continue
        _method, path, status, sent = m.groups()
        if path == "/robots.txt":
            robots += 1
        elif status == "200":
            pages += 1
            page_bytes += int(sent)
        else:
            other += 1
    # Body bytes nginx sent per page (compressed when the crawler asked
    # and --gzip made compressed copies).
    r = {"label": label, "run": int(run), "expected": int(expected), "pages": pages,
         "robots": robots, "other": other,
         "wire_kb_per_page": page_bytes / pages / 1000 if pages else 0.0}
    r.update(parse_time(time_txt))
    r["pages_per_s"] = pages / r["wall_s"] if r["wall_s"] else 0.0
    r["cpu_ms_per_page"] = r["cpu_s"] / pages * 1000 if pages else 0.0
    started, exited = (float(v) for v in open(clock_txt).read().split())
    r.update(timeline(access, started, exited))
    if sample_json:
        with open(sample_json) as f:
            r.update(json.load(f))
    print(json.dumps(r))


def table(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    head = "%-10s %3s %7s %8s %8s %7s %8s %8s %8s %8s %8s %8s" % (
        "crawler", "run", "pages", "expected", "wall_s", "pages/s", "cpu_s", "cpu_ms/p",
        "rss_MB", "wire_KB/p", "backlog", "pipeline")
    print(head)
    for r in runs:
        print("%-10s %3d %7d %8d %8.2f %7.0f %8.2f %8.3f %8.1f %9.2f %8s %8s" % (
            r["label"], r["run"], r["pages"], r["expected"], r["wall_s"], r["pages_per_s"],
            r["cpu_s"], r["cpu_ms_per_page"], r["peak_rss_mb"], r.get("wire_kb_per_page", 0.0),
            r.get("backlog_max", "-"), r.get("pipeline_max", "-")))
        if r["exit"] != 0:
            print("  ! %s run %d exited with status %d" % (r["label"], r["run"], r["exit"]))
    timed = [r for r in runs if r.get("bound_s")]
    if timed:
        print("\nwhere the wall went, ms (median over hosts; gaps: a host's response to its "
              "next request; idle: gaps of a whole request, per mille)")
        cols = ("start_ms", "start_last_ms", "gap_robots_ms", "gap_seed_ms", "gap_other_ms",
                "gap_other_p90_ms", "idle_cycles_permille", "stop_ms")
        print("%-10s %3s %8s %10s %10s %8s %9s %9s %6s %7s %7s %10s" % (
            "crawler", "run", "start", "last_start", "gap_robots", "gap_seed", "gap_other",
            "gap_p90", "idle", "stop", "bound_s", "over_bound"))
        for r in timed:
            cells = ["%.1f" % r[c] if r.get(c) is not None else "-" for c in cols]
            print("%-10s %3d %8s %10s %10s %8s %9s %9s %6s %7s %7.3f %9.1f%%" % (
                (r["label"], r["run"]) + tuple(cells) + (r["bound_s"], 100 * r["over_bound"])))
    by_run = {}
    for r in runs:
        by_run.setdefault(r["run"], {})[r["label"]] = r
    ratios = []
    print("\nratios trawl / spider-rs (pages/s: above 1 is trawl faster; "
          "cpu per page and RSS: below 1 is trawl leaner)")
    for run, pair in sorted(by_run.items()):
        t, s = pair.get("trawl"), pair.get("spider-rs")
        if not (t and s and s["pages_per_s"] and s["cpu_ms_per_page"] and s["peak_rss_mb"]):
            continue
        ratio = (t["pages_per_s"] / s["pages_per_s"],
                 t["cpu_ms_per_page"] / s["cpu_ms_per_page"],
                 t["peak_rss_mb"] / s["peak_rss_mb"])
        ratios.append(ratio)
        print("run %d: pages/s %.2f  cpu/page %.2f  peak rss %.2f" % ((run,) + ratio))
    if len(ratios) > 1:
        # Each run's pair ran back to back, so a ratio cancels the machine's
        # slow drift; the median of them is the figure to quote, with the
        # spread beside it.
        def spread(col):
            return "%.2f (%.2f-%.2f)" % (statistics.median(col), min(col), max(col))
        pages, cpu, rss = (spread(col) for col in zip(*ratios))
        print("median of %d runs: pages/s %s  cpu/page %s  peak rss %s" % (
            len(ratios), pages, cpu, rss))


def merge(base_path, extra_path):
    import tomllib
    with open(base_path, "rb") as f:
        base = tomllib.load(f)
    with open(extra_path, "rb") as f:
        extra = tomllib.load(f)

    def layer(into, over):
        for key, value in over.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                layer(into[key], value)
            else:
                into[key] = value

    def emit(value):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return repr(value)
        if isinstance(value, str):
            return json.dumps(value)
        if isinstance(value, list):
            return "[" + ", ".join(emit(v) for v in value) + "]"
        raise SystemExit("merge: unsupported value %r" % (value,))

    def tables(prefix, table, out):
        plain = {k: v for k, v in table.items() if not isinstance(v, dict)}
        if prefix and plain:
            out.append("[%s]" % prefix)
        out.extend("%s = %s" % (k, emit(v)) for k, v in plain.items())
        for k, v in table.items():
            if isinstance(v, dict):
                tables(prefix + "." + k if prefix else k, v, out)

    layer(base, extra)
    lines = ["# The side-by-side bench's settings with %s layered on." % extra_path]
    tables("", base, lines)
    with open(base_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "port":
        print(free_port())
    elif cmd == "wait":
        wait(args[0])
    elif cmd == "sample":
        sample(args[0], int(args[1]), args[2], args[3])
    elif cmd == "stats":
        stats(*args)
    elif cmd == "table":
        table(args[0])
    elif cmd == "merge":
        merge(args[0], args[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

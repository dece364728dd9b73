#!/usr/bin/env python3
"""Runs one libFuzzer target of a campaign until its coverage levels off.

Used by `scripts/fuzz.sh campaign`; prints the target's row of the
campaign table (Markdown) on stdout, the fuzzer's own output going to a
log file.

The fuzzer runs with `-print_pcs=1`, so every edge it covers for the first
time after loading its corpus is printed as it is covered. Each is attributed to the function, and
so the crate, it lies in (the binary's symbol table, read with `nm`), and
timed as it arrives. That separates two kinds of growth: edges in trawl's
own code (`trawl::`, `trawl_fuzz::` in the symbol's name, generic code
instantiated with trawl's types included) and edges in dependencies, some
of which are large generated tables (the public-suffix list, Unicode data)
where a fuzzer finds one more edge per new suffix or code point for hours
while trawl's logic around them has long been explored.

The run stops at a plateau: when the chosen count (`--plateau all`: every
edge; `--plateau own`: trawl's own) has not risen for `--flat` seconds
(the fuzzer is interrupted with SIGINT, as Ctrl-C would, and prints its
final statistics; its exit 72 is then counted as clean), or after
`--max` seconds. The row says when each count last rose, so a reader can
judge both.
"""

import argparse
import bisect
import os
import re
import signal
import subprocess
import sys
import threading
import time

OWN = re.compile(r"\btrawl(_fuzz)?::")
NEW_PC = re.compile(r"NEW_PC: (0x[0-9a-f]+)")
# libFuzzer's status lines: "#1234 NEW cov: 567 ft: 890 corp: ..."
STATUS = re.compile(r"\bcov: (\d+) ft: (\d+)")
STAT = re.compile(r"^stat::(\w+):\s+(\d+)")


def symbols(binary):
    """The binary's functions as (sorted start addresses, names)."""
    out = subprocess.run(
        ["nm", "-n", "-C", "--defined-only", binary],
        check=True, capture_output=True, text=True,
    ).stdout
    starts, names = [], []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwWi":
            starts.append(int(parts[0], 16))
            names.append(parts[2])
    return starts, names


def crate_of(name):
    """The crate a demangled symbol belongs to: trawl's own if its path
    names trawl anywhere, else the first path segment."""
    if OWN.search(name):
        return "trawl"
    name = name.lstrip("<&*").removeprefix("dyn ").removeprefix("mut ")
    return name.split("::", 1)[0] or "?"


def load_base(binary, pid):
    """Where the binary is mapped in process `pid` (0 for a non-PIE
    executable, whose symbols are absolute addresses)."""
    with open(binary, "rb") as f:
        header = f.read(18)
    if int.from_bytes(header[16:18], "little") == 2:  # ET_EXEC
        return 0
    real = os.path.realpath(binary)
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == real and int(fields[2], 16) == 0:
                return int(fields[0].split("-")[0], 16)
    return None


class Coverage:
    """Edges seen so far, by crate, and when each count last rose."""

    def __init__(self, binary):
        self.starts, self.names = symbols(binary)
        self.crate_memo = {}
        self.cov = self.ft = 0
        self.own = 0  # trawl's edges found while fuzzing
        self.cov_grew = self.own_grew = 0.0  # seconds into the run
        self.fuzzing = False  # past the corpus load (libFuzzer's INITED)
        self.inited = 0.0  # when the corpus load ended
        self.found = {}  # crate -> edges found while fuzzing
        self.recent = []  # (seconds, crate) of edges found while fuzzing

    def crate(self, pc):
        i = bisect.bisect_right(self.starts, pc) - 1
        if i < 0:
            return "?"
        if i not in self.crate_memo:
            self.crate_memo[i] = crate_of(self.names[i])
        return self.crate_memo[i]

    def edge(self, pc, now):
        crate = self.crate(pc)
        if crate == "trawl":
            self.own += 1
            self.own_grew = now
        if self.fuzzing:  # (libFuzzer prints none before)
            self.found[crate] = self.found.get(crate, 0) + 1
            self.recent.append((now, crate))

    def status(self, cov, ft, now):
        if cov > self.cov:
            self.cov, self.cov_grew = cov, now
        self.ft = max(self.ft, ft)


def top(counts, n=3):
    """The `n` crates with most edges, as "crate 12, other 3"."""
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{crate} {count}" for crate, count in ranked[:n]) or "none"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--max", type=int, required=True, help="seconds at most")
    ap.add_argument("--flat", type=int, required=True, help="seconds without growth")
    ap.add_argument("--plateau", choices=["all", "own"], default="all")
    ap.add_argument("--log", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    binary = command[0]

    cov = Coverage(binary)
    start = time.monotonic()
    proc = subprocess.Popen(
        command + ["-print_pcs=1", f"-max_total_time={args.max}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    base = None
    stats = {}
    lock = threading.Lock()

    def read():
        nonlocal base
        with open(args.log, "wb") as log:
            for raw in proc.stdout:
                log.write(raw)
                line = raw.decode("utf-8", "replace")
                now = time.monotonic() - start
                with lock:
                    if m := NEW_PC.search(line):
                        if base is None:
                            base = load_base(binary, proc.pid)
                        if base is not None:
                            cov.edge(int(m.group(1), 16) - base, now)
                        continue
                    if "INITED" in line:
                        cov.fuzzing, cov.inited = True, now
                    if m := STATUS.search(line):
                        cov.status(int(m.group(1)), int(m.group(2)), now)
                    if m := STAT.match(line):
                        stats[m.group(1)] = int(m.group(2))

    reader = threading.Thread(target=read)
    reader.start()
    stop = "max"
    while proc.poll() is None:
        time.sleep(1)
        now = time.monotonic() - start
        with lock:
            grew = cov.own_grew if args.plateau == "own" else cov.cov_grew
            # Flat since the later of its last rise and the corpus load's
            # end: a long load is not a plateau.
            flat = now - max(grew, cov.inited)
        if cov.fuzzing and flat >= args.flat:
            stop = "plateau"
            proc.send_signal(signal.SIGINT)
            break
    status = proc.wait()
    reader.join()
    seconds = time.monotonic() - start
    # libFuzzer exits 72 when interrupted: the plateau stop, not a finding.
    if stop == "plateau" and status == 72:
        status = 0
    last = {}
    for when, crate in cov.recent:
        if when >= seconds - args.flat:
            last[crate] = last.get(crate, 0) + 1
    result = "clean" if status == 0 else f"FINDING (fuzz/artifacts/{args.target}/)"
    own_grew = f"{cov.own_grew:.0f}" if cov.own else "-"
    print(
        f"| `{args.target}` | {seconds:.0f} | {stats.get('number_of_executed_units', 0)} "
        f"| {stats.get('average_exec_per_sec', 0)} | {cov.cov} | {cov.ft} | {cov.own} "
        f"| {stats.get('peak_rss_mb', 0)} | {cov.cov_grew:.0f} | {own_grew} "
        f"| {stop} ({args.plateau}) | {top(cov.found)} | {top(last)} | {result} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs one libFuzzer target of a campaign until its coverage levels off.

Used by `scripts/fuzz.sh campaign`; prints the target's row of the
campaign table (Markdown) on stdout, the fuzzer's own output going to a
log file.

The fuzzer runs with `-print_pcs=1`, so every edge it covers for the first
time after loading its corpus is printed as it is covered. Each is timed
as it arrives and attributed to the source file it lies in (the binary's
debug information, read with `llvm-symbolizer`), and so to a crate. That
separates two kinds of growth: edges in trawl's own code (this checkout's
files, code of trawl's inlined elsewhere included) and edges in
dependencies, some of which are large generated tables (the public-suffix
list, Unicode data) where a fuzzer finds one more edge per new suffix or
code point for hours while trawl's logic around them has long been
explored.

The run stops at a plateau: when the chosen count (`--plateau all`: every
edge; `--plateau own`: trawl's own) has not risen for `--flat` seconds
(the fuzzer is interrupted with SIGINT, as Ctrl-C would, and prints its
final statistics; its exit 72 is then counted as clean), or after
`--max` seconds. The row says when each count last rose, so a reader can
judge both; `<log>.edges` lists every edge found while fuzzing (second,
crate, source file, function).
"""

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

NEW_PC = re.compile(r"NEW_PC: (0x[0-9a-f]+)")
# libFuzzer's status lines: "#1234 NEW cov: 567 ft: 890 corp: ..."
STATUS = re.compile(r"\bcov: (\d+) ft: (\d+)")
STAT = re.compile(r"^stat::(\w+):\s+(\d+)")


class Symbolizer:
    """Where an address of the binary is in the source: a persistent
    `llvm-symbolizer` reading the binary's debug information. The
    innermost frame counts, so code inlined from trawl (a closure passed
    to an iterator of `core`, say) is trawl's, and a dependency's generic
    code instantiated with trawl's types is the dependency's."""

    def __init__(self, binary, root):
        self.root = os.path.realpath(root) + os.sep
        # JSON: one line per address asked, whatever the address (the
        # plain style answers an address it cannot parse with one line
        # and no blank line after it, and a reader waiting for the blank
        # would wait for ever).
        self.proc = subprocess.Popen(
            ["llvm-symbolizer", "--output-style=JSON", f"--obj={binary}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def locate(self, address):
        """(function, source file) of the innermost frame at `address`."""
        if address < 0:
            return "??", "??"
        self.proc.stdin.write(f"{address:#x}\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline() or "{}")
        frames = answer.get("Symbol") or [{}]
        return frames[0].get("FunctionName") or "??", frames[0].get("FileName") or "??"

    def crate(self, path):
        """The crate a source file belongs to: trawl (this checkout), a
        crate from the registry by its directory, the standard library's
        part (core, alloc, std), or "?"."""
        if path.startswith(self.root):
            return "trawl"
        if m := REGISTRY.search(path):
            return m.group(1)
        if m := STD.search(path):
            return m.group(1)
        return "?"


# .../registry/src/<index>/<crate>-<version>/... (and the standard
# library's own dependencies, /rust/deps/<crate>-<version>/...);
# /rustc/<hash>/library/<lib>/...
REGISTRY = re.compile(r"/(?:registry/src/[^/]+|rust/deps)/([A-Za-z0-9_-]+?)-\d+\.\d+\.\d+[^/]*/")
STD = re.compile(r"/rustc/[0-9a-f]+/library/([a-z_]+)/")


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

    def __init__(self, symbolizer):
        self.symbolizer = symbolizer
        self.cov = self.ft = 0
        self.own = 0  # trawl's edges found while fuzzing
        self.cov_grew = self.own_grew = 0.0  # seconds into the run
        self.fuzzing = False  # past the corpus load (libFuzzer's INITED)
        self.inited = 0.0  # when the corpus load ended
        self.found = []  # (seconds, crate) of every edge found while fuzzing

    def edge(self, pc, now, timeline):
        """An edge covered for the first time (libFuzzer prints none
        before fuzzing starts)."""
        function, path = self.symbolizer.locate(pc)
        crate = self.symbolizer.crate(path)
        timeline.write(f"{now:.1f}\t{crate}\t{path}\t{function}\n")
        if crate == "trawl":
            self.own += 1
            self.own_grew = now
        self.found.append((now, crate))

    def status(self, cov, ft, now):
        if cov > self.cov:
            self.cov, self.cov_grew = cov, now
        self.ft = max(self.ft, ft)


def top(crates, n=3):
    """How many edges, and the `n` crates with most: "15: crate 12, other 3"."""
    counts = collections.Counter(crates)
    if not counts:
        return "0"
    ranked = counts.most_common(n)
    return f"{counts.total()}: " + ", ".join(f"{c} {k}" for c, k in ranked)


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

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cov = Coverage(Symbolizer(binary, root))
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
        # The timeline: every edge found while fuzzing, with the second it
        # was found at, its crate, its source file and its function.
        with open(args.log, "wb") as log, open(
            args.log + ".edges", "w", buffering=1  # a line at a time: readable as it runs
        ) as timeline:
            for raw in proc.stdout:
                log.write(raw)
                line = raw.decode("utf-8", "replace")
                now = time.monotonic() - start
                with lock:
                    if m := NEW_PC.search(line):
                        if base is None:
                            base = load_base(binary, proc.pid)
                        if base is not None:
                            cov.edge(int(m.group(1), 16) - base, now, timeline)
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
    found = [crate for _, crate in cov.found]
    last = [crate for when, crate in cov.found if when >= seconds - args.flat]
    result = "clean" if status == 0 else f"FINDING (fuzz/artifacts/{args.target}/)"
    own_grew = f"{cov.own_grew:.0f}" if cov.own else "-"
    print(
        f"| `{args.target}` | {seconds:.0f} | {stats.get('number_of_executed_units', 0)} "
        f"| {stats.get('average_exec_per_sec', 0)} | {cov.cov} | {cov.ft} | {cov.own} "
        f"| {stats.get('peak_rss_mb', 0)} | {cov.cov_grew:.0f} | {own_grew} "
        f"| {stop} ({args.plateau}) | {top(found)} | {top(last)} | {result} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

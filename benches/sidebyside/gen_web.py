#!/usr/bin/env python3
"""The side-by-side bench's web: N hosts x M static pages, served by nginx.

Host i (0-based) is the IP literal 127.0.(1 + i // 250).(1 + i % 250), so
hosts 0..249 are 127.0.1.1..127.0.1.250, 250..499 are 127.0.2.1..., etc.
Each host gets OUT/<ip>/robots.txt (allow all), OUT/<ip>/index.html (page 0)
and OUT/<ip>/p/<k>.html for k in 1..M-1. Pages are ~SIZE bytes of varied
text with a <title> and 20-40 links: ~80% to pages on the same host, ~20%
to pages on other hosts (absolute http://<ip>:PORT/...). Every page is
reachable from its host's index (page k links to k+1). Deterministic.

usage: gen_web.py OUT [--hosts 500] [--pages 40] [--port 8080] [--size 15000]
Writes OUT/seeds.txt (one index URL per host) and OUT/hosts.txt. Every host
is a loopback address, so a crawl of it never leaves the machine.
"""
import argparse
import os
import random

WORDS = ("crawler frontier politeness robots sitemap anchor index archive "
         "request response header latency throughput bandwidth scheduler "
         "queue budget host domain origin canonical redirect fetch parse "
         "extract render token stream buffer socket packet window cache "
         "record warc digest checksum replay snapshot mirror harvest seed "
         "depth breadth priority weight rank score table column river "
         "mountain forest garden harbor lantern meadow orchard valley "
         "quartz ember falcon glacier horizon island jasmine kettle ").split()


def host_ip(i):
    return "127.0.%d.%d" % (1 + i // 250, 1 + i % 250)


def page_path(k):
    return "/" if k == 0 else "/p/%d.html" % k


def para(rng, n):
    out = []
    for _ in range(n):
        w = rng.choice(WORDS)
        out.append(w.capitalize() if rng.random() < 0.08 else w)
    return " ".join(out) + "."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--size", type=int, default=15000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    assert a.hosts <= 250 * 254, "too many hosts"
    ips = [host_ip(i) for i in range(a.hosts)]
    total = 0
    for hi, ip in enumerate(ips):
        d = os.path.join(a.out, ip)
        os.makedirs(os.path.join(d, "p"), exist_ok=True)
        with open(os.path.join(d, "robots.txt"), "w") as f:
            f.write("User-agent: *\nAllow: /\n")
        for k in range(a.pages):
            rng = random.Random(a.seed * 1_000_003 + hi * 10_007 + k)
            nlinks = rng.randint(20, 40)
            links = []
            if k + 1 < a.pages:
                links.append(page_path(k + 1))  # chain: all reachable
            while len(links) < nlinks:
                if a.hosts > 1 and rng.random() < 0.2:
                    oh = rng.randrange(a.hosts - 1)
                    oh = oh if oh < hi else oh + 1
                    links.append("http://%s:%d%s" % (
                        ips[oh], a.port, page_path(rng.randrange(a.pages))))
                else:
                    links.append(page_path(rng.randrange(a.pages)))
            rng.shuffle(links)
            title = "%s %s %d/%d on %s" % (
                rng.choice(WORDS).capitalize(), rng.choice(WORDS), k,
                a.pages, ip)
            parts = ["<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                     "<title>%s</title></head>\n<body>\n<h1>%s</h1>\n"
                     % (title, title)]
            size = len(parts[0])
            li = 0
            while size < a.size - 40 or li < len(links):
                if li < len(links) and (size > a.size * li / len(links)
                                        or rng.random() < 0.5):
                    s = '<p><a href="%s">%s %s</a></p>\n' % (
                        links[li], rng.choice(WORDS), rng.choice(WORDS))
                    li += 1
                else:
                    s = "<p>%s</p>\n" % para(rng, rng.randint(15, 60))
                parts.append(s)
                size += len(s)
            parts.append("</body></html>\n")
            name = "index.html" if k == 0 else "p/%d.html" % k
            with open(os.path.join(d, name), "w") as f:
                body = "".join(parts)
                f.write(body)
                total += len(body)
    with open(os.path.join(a.out, "seeds.txt"), "w") as f:
        f.write("".join("http://%s:%d/\n" % (ip, a.port) for ip in ips))
    with open(os.path.join(a.out, "hosts.txt"), "w") as f:
        f.write("".join(ip + "\n" for ip in ips))
    n = a.hosts * a.pages
    print("hosts=%d pages=%d bytes=%d avg=%.0f" % (a.hosts, n, total,
                                                   total / n))


if __name__ == "__main__":
    main()

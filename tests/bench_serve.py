#!/usr/bin/env python3
"""bench_serve.py CADENZA SOURCE_ROOT [--seconds S] - what `cadenza serve` itself costs, with a
zero-cost model (a fitted cost file whose every coefficient is 0: each step takes no
modelled time, so the HTTP threads and the runtime thread are all that is measured):

- the ceiling: streamed tokens/s and requests/s with 1, 64 and 1,024 clients at once, each
  sending a request of 256 tokens as soon as its last one ended (closed loop);
- the time the server adds to TTFT (p50, p99): the client's time to the first token minus
  the step's own, which is zero here;
- memory per open stream: the server's resident memory with 1,024 streams open (the
  roofline's step times, so they stay open) against none.

Clients are asyncio connections on loopback in this process (raw HTTP/1.1; a chunk counted
per "data: " event), so on a small machine they share its cores with the server: the
figures are a floor. Prints one line per figure; fails only when a run fails."""
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time


async def one_stream(port, max_tokens, ttfts):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"prompt": "benchmark", "max_tokens": max_tokens, "stream": True}).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)).encode()
    t0 = time.perf_counter()
    writer.write(head + body)
    await writer.drain()
    events = 0
    first = None
    tail = b""
    while True:
        data = await reader.read(65536)
        if not data:
            break
        buf = tail + data
        n = buf.count(b"data: ")
        if n and first is None:
            first = time.perf_counter() - t0
        events += n
        tail = buf[-8:]
    writer.close()
    if first is not None and ttfts is not None:
        ttfts.append(first)
    return events - 1  # the [DONE] event


async def closed_loop(port, clients, seconds, max_tokens):
    stop = time.perf_counter() + seconds
    tokens = 0
    done = 0
    ttfts = []

    async def client():
        nonlocal tokens, done
        while time.perf_counter() < stop:
            t = await one_stream(port, max_tokens, ttfts)
            tokens += t
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - t0
    return tokens / wall, done / wall, sorted(ttfts)


def pct(xs, p):
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def start(cz, root, extra, tmp, preexec_fn=None):
    """`cadenza serve experiments/default.json EXTRA...` on a free port: (process, port)."""
    portf = os.path.join(tmp, "port")
    if os.path.exists(portf):
        os.remove(portf)
    p = subprocess.Popen([cz, "serve", os.path.join(root, "experiments/default.json"), "--port",
                          "0", "--port-file", portf, "--quiet"] + extra, preexec_fn=preexec_fn)
    for _ in range(600):
        if os.path.exists(portf) and open(portf).read().strip():
            return p, int(open(portf).read())
        time.sleep(0.05)
    p.kill()
    raise SystemExit("the server did not start")


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def hold_streams(port, n, pid):
    conns = []
    for _ in range(n):
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
        except OSError as e:
            raise SystemExit("could not open stream %d of %d: %r" % (len(conns) + 1, n, e))
        body = json.dumps({"prompt": "hold", "max_tokens": 8000, "stream": True}).encode()
        w.write(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %d\r\n\r\n" % len(body)).encode() + body)
        await w.drain()
        conns.append((r, w))
    # each stream has started: its first bytes are in
    for r, _ in conns:
        await r.read(1)
    await asyncio.sleep(1.0)
    rss = rss_kb(pid)
    for _, w in conns:
        w.close()
    return rss


def main():
    cz, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    seconds = 5.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    tmp = tempfile.mkdtemp()
    zero = os.path.join(tmp, "zero.json")
    with open(zero, "w") as f:
        json.dump({"kind": "fitted", "model": "llama-3-8b", "stages": {"llm": {}}}, f)
    # every client's request in the batch at once: the scheduler's queue is not measured
    p, port = start(cz, root, ["--cost", zero, "--max-pending-tokens", "65536", "--set",
                               "server.max_num_seqs=1024"], tmp)
    try:
        for clients in (1, 64, 1024):
            tok_s, req_s, ttfts = asyncio.run(closed_loop(port, clients, seconds, 256))
            print("serve ceiling, %4d streams: %9.0f tokens/s  %7.1f requests/s  added TTFT p50 "
                  "%.2f ms p99 %.2f ms" % (clients, tok_s, req_s, 1e3 * pct(ttfts, 50),
                                           1e3 * pct(ttfts, 99)), flush=True)
    finally:
        p.terminate()
        p.wait()
    p, port = start(cz, root, [], tmp)
    try:
        time.sleep(0.5)
        idle = rss_kb(p.pid)
        n = 1024
        held = asyncio.run(hold_streams(port, n, p.pid))
        print("serve memory: %.1f MB idle, %.1f MB with %d streams open: %.1f kB a stream"
              % (idle / 1024.0, held / 1024.0, n, (held - idle) / n), flush=True)
    finally:
        p.terminate()
        p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

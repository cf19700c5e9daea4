#!/usr/bin/env python3
"""bench_http.py CADENZA SOURCE_ROOT - what the HTTP client (`cadenza replay --endpoint`)
itself costs, against `cadenza serve` on loopback with a slow modelled step (a fitted cost
file of 0.1 s a step, so streams stay open: 10 tokens/s each):

- the send lag (how late each request leaves the client after its time in the workload,
  p50 / p99 / max) at about 1, 100 and 1,000 streams open at once: requests of 64 prompt
  tokens and 50 output tokens arriving as a Poisson process at 0.2, 20 and 200 req/s
  (10, 500 and 1,000 requests);
- the client's own CPU time per request and per streamed chunk (its user + system time
  over the run), and the streams it held open at the peak (vLLM's max_concurrent_requests).

With two CPUs or more the server runs on half of them and the client on the other half
(the client's lag is then its own, not the server's CPU use); the figures are a floor on a
small machine. Prints one line per level; fails only when a run fails or loses a request."""
import json
import os
import resource
import subprocess
import sys
import tempfile

from bench_serve import start


CPUS = sorted(os.sched_getaffinity(0))
# with two CPUs or more, the server and the client each get their own, so the client's send
# lag is its own and not the server's CPU use
SERVER_CPUS = CPUS[len(CPUS) // 2:] if len(CPUS) > 1 else CPUS
CLIENT_CPUS = CPUS[:len(CPUS) // 2] if len(CPUS) > 1 else CPUS


def pin(cpus):
    os.sched_setaffinity(0, cpus)


def main():
    cz, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp()
    slow = os.path.join(tmp, "slow.json")
    with open(slow, "w") as f:
        json.dump({"kind": "fitted", "model": "llama-3-8b",
                   "stages": {"llm": {"per_step_s": 0.1}}}, f)
    p, port = start(cz, root, ["--cost", slow, "--max-pending-tokens", "1000000", "--set",
                               "server.max_num_seqs=2048", "--set",
                               "server.max_num_batched_tokens=200000"], tmp,
                    preexec_fn=lambda: pin(SERVER_CPUS))
    rc = 0
    try:
        for requests, rate in ((10, 0.2), (500, 20.0), (1000, 200.0)):
            cfg = os.path.join(tmp, "client.json")
            with open(cfg, "w") as f:
                json.dump({"model": "llama-3-8b", "hardware": "h100-sxm", "seed": 3, "workload": {
                    "synthetic": {"requests": requests,
                                  "input_tokens": {"dist": "uniform", "min": 64, "max": 64},
                                  "output_tokens": {"dist": "uniform", "min": 50, "max": 50}},
                    "arrivals": {"process": "poisson", "rate_rps": rate}}}, f)
            summ = os.path.join(tmp, "s.json")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run([cz, "replay", cfg, "--endpoint", "http://127.0.0.1:%d" % port,
                                "--summary", summ, "--quiet"], capture_output=True, text=True,
                               preexec_fn=lambda: pin(CLIENT_CPUS))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                print("replay failed:", r.stderr, flush=True)
                rc = 1
                continue
            s = json.load(open(summ))
            if s["completed"] != requests:
                print("lost requests: %d of %d completed, %s" % (s["completed"], requests,
                                                                 s["http"]), flush=True)
                rc = 1
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            chunks = s["http"]["chunks"]
            print("http client, %4d req at %5.1f req/s (peak %4d streams open): send lag p50 "
                  "%.3f ms p99 %.3f ms max %.3f ms; client CPU %.0f us a request, %.1f us a "
                  "chunk (client on CPUs %s)" % (requests, rate, s["max_concurrent_requests"],
                             s["median_send_lag_ms"], s["p99_send_lag_ms"],
                             s["max_send_lag_ms"], 1e6 * cpu / requests,
                             1e6 * cpu / max(chunks, 1),
                             ",".join(map(str, CLIENT_CPUS))), flush=True)
    finally:
        p.terminate()
        p.wait()
    return rc


if __name__ == "__main__":
    sys.exit(main())

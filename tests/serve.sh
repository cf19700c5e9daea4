#!/usr/bin/env bash
# tests/serve.sh CADENZA SOURCE_ROOT - `cadenza serve` on loopback, driven by curl, by
# Python's standard library (tests/serve_check.py) and by the official OpenAI client
# (tests/serve_client.mjs, skipped without Node.js and tests/node's packages): plain and
# streamed completions and chat, usage, errors, the API key, sessions with cached_tokens,
# a client that goes away (aborted), the interaction plane's events (barge-in, playback,
# speech start and its KV preload, audio TTFP), /metrics, 200 concurrent streams, SIGTERM with
# streams open (each ends "abort", every request accounted for), and a served workload
# against the simulator's prediction for the same requests at the same times. Prints
# "N passed, N failed".
set -u
cz=$(realpath "$1")
root=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$root" || exit 1
. "$(dirname "$0")/check.sh"
py=$root/tests/serve_check.py

# starts a server on $cfgfile (options...) and waits until it answers; sets $port and
# $server
cfgfile=experiments/default.json
start() { serve_start "$cfgfile" "$@"; }

# stops the server with SIGTERM; its exit status in $stopped
stop() {
    kill -TERM "$server"
    wait "$server"
    stopped=$?
}

start --summary "$tmp/s1.json" -o "$tmp/r1.h5" || exit 1
check "GET /health" curl -sf "http://127.0.0.1:$port/health"
check "curl: a plain completion" bash -c \
    "curl -sf http://127.0.0.1:$port/v1/completions -d '{\"prompt\":\"hi\",\"max_tokens\":2}' |
     grep -q '\"finish_reason\":\"length\"'"
check "curl: a stream ends with data: [DONE]" bash -c \
    "curl -sfN http://127.0.0.1:$port/v1/completions -d '{\"prompt\":\"hi\",\"max_tokens\":2,\"stream\":true}' |
     tail -n 2 | grep -qx 'data: \\[DONE\\]'"
for c in plain stream chat errors sessions disconnect metrics events seed stop; do
    check "http: $c" python3 "$py" "$port" "$c"
done
check "http: 200 concurrent streams of 20 tokens" python3 "$py" "$port" concurrent 200 20
check "the OpenAI client (npm openai)" bash -c \
    "node tests/serve_client.mjs http://127.0.0.1:$port/v1 none; r=\$?; [ \$r -eq 0 ] || [ \$r -eq 77 ]"
stop
check "SIGTERM: the server exits 0" test "$stopped" -eq 0
check "the summary accounts for every request (driver serve)" python3 - "$tmp/s1.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["driver"] == "serve", s["driver"]
total = sum(s[k] for k in ("completed", "aborted", "rejected", "failed", "unfinished"))
assert total == s["requests"] and s["requests"] > 200, (total, s["requests"])
assert s["aborted"] >= 1 and s["serve"]["client_aborts"] >= 1, s["serve"]
assert s["serve"]["cached_tokens"] > 0, s["serve"]
# the modelled execution reports how it kept the model's times (how late, not held to a
# bound: a shared machine can hold the thread off the core)
c = s["serve"]["clock"]
assert c["model_times"] > 200 and 0 <= c["mean_late_us"] <= c["max_late_us"], c
assert 0 <= c["over_1ms"] <= c["model_times"], c
EOF
h5table=$(dirname "$cz")/../tests/h5table
check "the results file has a row a request" python3 - "$h5table" "$tmp/r1.h5" "$tmp/s1.json" <<'EOF'
import json, subprocess, sys
rows = subprocess.run([sys.argv[1], sys.argv[2], "/requests"], capture_output=True, text=True,
                      check=True).stdout.strip().split("\n")[1:]
s = json.load(open(sys.argv[3]))
assert len(rows) == s["requests"], (len(rows), s["requests"])
EOF

# the API key
start --api-key sesame || exit 1
check "http: the API key" python3 "$py" "$port" auth sesame
check "http: the API key guards the events" python3 "$py" "$port" auth_events sesame
check "the OpenAI client with the key" bash -c \
    "node tests/serve_client.mjs http://127.0.0.1:$port/v1 sesame; r=\$?; [ \$r -eq 0 ] || [ \$r -eq 77 ]"
stop

# speech-triggered preload: offloaded KV evicted by another session comes back on the
# user's speech start (LiveServe's section 5.2) before the next request
start --set server.kv_idle=offload --set server.kv_preload=true --set server.kv_blocks=200 || exit 1
check "events: a speech start preloads a session's offloaded KV" python3 "$py" "$port" preload
stop

# SIGTERM with streams open: each ends with finish_reason abort, the run accounts for them
start --summary "$tmp/s2.json" || exit 1
python3 "$py" "$port" held 8 60 >"$tmp/held.out" 2>&1 &
held=$!
for _ in $(seq 1 200); do grep -q started "$tmp/held.out" && break; sleep 0.05; done
stop
wait "$held"
held_rc=$?
check "SIGTERM with 8 streams open: each ends aborted with [DONE]" test "$held_rc" -eq 0
check "... the server exits 0 and counts them aborted" bash -c \
    "[ $stopped -eq 0 ] && python3 -c \"
import json; s = json.load(open('$tmp/s2.json'))
assert s['aborted'] == 8 and s['requests'] == 8, (s['aborted'], s['requests'])\""

# a served workload against the simulator: the same requests at the times the server took
# them give the same latencies (the modelled execution is the simulator on the wall clock)
start --summary "$tmp/s3.json" -o "$tmp/r3.h5" || exit 1
check "40 requests at spread times" python3 "$py" "$port" timed "$tmp/timed.out" 40 7
stop
check "the simulator predicts what the server did, request by request" python3 - \
    "$cz" "$tmp" "$root" <<'EOF'
import json, subprocess, sys
cz, tmp, root = sys.argv[1:4]
# the server's requests, from its results file (tests/h5table prints the table)
import os
h5table = os.path.join(os.path.dirname(cz), "..", "tests", "h5table")
assert os.path.exists(h5table), "tests/h5table not built beside " + cz
def table(h5):
    txt = subprocess.run([h5table, h5, "/requests"], capture_output=True, text=True, check=True).stdout
    lines = txt.strip().split("\n")
    head = lines[0].split("\t")
    return [dict(zip(head, l.split("\t"))) for l in lines[1:]]
served = sorted(table(tmp + "/r3.h5"), key=lambda r: (float(r["arrival_s"]), int(r["session"])))
assert len(served) == 40, len(served)
with open(tmp + "/served.jsonl", "w") as f:
    f.write(json.dumps({"format": "cadenza-sessions", "version": 1, "arrivals_given": True}) + "\n")
    for i, r in enumerate(served):
        f.write(json.dumps({"session": "r%d" % i, "turns": [{
            "arrival_s": float(r["arrival_s"]), "in_text_tokens": int(r["input_tokens"]),
            "out_text_tokens": int(r["output_tokens"])}]}) + "\n")
subprocess.run([cz, "sim", "experiments/default.json", "--quiet", "--no-progress",
                "--set", "workload.trace={\"path\": \"%s/served.jsonl\"}" % tmp,
                "--set", "workload.arrivals={\"process\": \"trace\"}",
                "-o", tmp + "/p3.h5"], check=True)
pred = sorted(table(tmp + "/p3.h5"), key=lambda r: (float(r["arrival_s"]), int(r["session"])))
assert len(pred) == 40
worst = 0.0
for a, b in zip(served, pred):
    for k in ("ttft_s", "e2el_s", "queue_wait_s"):
        worst = max(worst, abs(float(a[k]) - float(b[k])))
# the tables print 9 significant digits: a few microseconds at these times
assert worst < 2e-5, "largest difference %g s" % worst
EOF

# the engine's execution: a tiny Llama-architecture decoder with random weights on the CPU
cfgfile=experiments/engine/cpu.json
start --execution engine --threads 2 --summary "$tmp/s4.json" -o "$tmp/r4.h5" || exit 1
for c in stream sessions disconnect metrics stop; do
    check "engine http: $c" python3 "$py" "$port" "$c"
done
check "engine: a barge-in keeps the heard tokens' KV; the next reply is a cold prompt's" \
    python3 "$py" "$port" events engine
check "engine: greedy ids repeat; stop ids and min_tokens; per-request sampling and seeds; a session's KV gives a cold prompt's reply" \
    python3 "$py" "$port" engine 4096
check "engine: 200 concurrent streams of 20 tokens" python3 "$py" "$port" concurrent 200 20
check "engine: the OpenAI client (npm openai)" bash -c \
    "node tests/serve_client.mjs http://127.0.0.1:$port/v1 none; r=\$?; [ \$r -eq 0 ] || [ \$r -eq 77 ]"
python3 "$py" "$port" held 8 60 >"$tmp/held4.out" 2>&1 &
held=$!
for _ in $(seq 1 200); do grep -q started "$tmp/held4.out" && break; sleep 0.05; done
stop
wait "$held"
held_rc=$?
check "engine: SIGTERM with 8 streams open: each ends aborted with [DONE]" test "$held_rc" -eq 0
check "engine: the server exits 0; every request has one outcome; the steps are recorded" \
    python3 - "$stopped" "$tmp/s4.json" "$h5table" "$tmp/r4.h5" <<'EOF'
import json, subprocess, sys
assert sys.argv[1] == "0", "exit status " + sys.argv[1]
s = json.load(open(sys.argv[2]))
assert s["driver"] == "serve" and s["serve"]["execution"] == "engine", s["serve"]
total = sum(s[k] for k in ("completed", "aborted", "rejected", "failed", "unfinished"))
assert total == s["requests"] and s["requests"] > 200, (total, s["requests"])
assert s["aborted"] >= 9 and s["serve"]["cached_tokens"] > 0, (s["aborted"], s["serve"])
assert "clock" not in s["serve"], s["serve"]  # the engine's steps take what they take
steps = subprocess.run([sys.argv[3], sys.argv[4], "/steps"], capture_output=True, text=True,
                       check=True).stdout.strip().split("\n")[1:]
assert len(steps) >= 100, len(steps)
EOF
cfgfile=experiments/default.json

# bad command lines and configs
check "serve --help" "$cz" serve --help
check "serve without a config exits 2" expect_exit 2 "$cz" serve
check "serve --port 70000 exits 2" expect_exit 2 "$cz" serve experiments/default.json --port 70000
check "serve --execution fast exits 2" expect_exit 2 "$cz" serve experiments/default.json --execution fast
check "serve --host not-an-address exits 2" expect_exit 2 "$cz" serve experiments/default.json \
    --host not-an-address --port 0
check "a multi-stage pipeline is refused with exit 2" expect_exit 2 "$cz" serve \
    experiments/liveserve/sharegpt_audio.json --port 0
check "serve --backend tpu exits 2" expect_exit 2 "$cz" serve experiments/engine/cpu.json \
    --execution engine --backend tpu --port 0
check "serve --threads 0 exits 2" expect_exit 2 "$cz" serve experiments/engine/cpu.json \
    --execution engine --threads 0 --port 0
check "the engine's execution of a cross-stage config exits 2" expect_exit 2 "$cz" serve \
    experiments/engine/nova_cpu.json --execution engine --port 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

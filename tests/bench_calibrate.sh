#!/usr/bin/env bash
# tests/bench_calibrate.sh CADENZA SOURCE_ROOT [REQUESTS] - how long `calibrate --observed`
# takes (the target: under 5 minutes): two observed runs of REQUESTS requests each
# (default 2,000; the Azure conversation trace at time scales 1 and 0.5, simulated on a
# known cost) fitted with every group (step, compute, kv, seq, ingest), each run held out
# in turn. Prints the wall time, the simulations and their rate, and what came back.
set -eu
cz=$(realpath "$1")
root=$2
n=${3:-2000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
cpu=experiments/engine/cpu.json
cat >"$tmp/truth.json" <<'JSON'
{"kind": "fitted", "model": "tiny-llama",
 "stages": {"llm": {"per_step_s": 3e-3, "per_seq_s": 1e-4, "per_token_s": 3e-5,
                    "per_kv_byte_s": 2e-10}},
 "request": {"ingest_s": 4e-3}}
JSON
cat >"$tmp/start.json" <<'JSON'
{"kind": "fitted", "model": "tiny-llama",
 "stages": {"llm": {"per_step_s": 2e-3, "per_seq_s": 1e-4, "per_token_s": 2e-5,
                    "per_kv_byte_s": 2e-10}}}
JSON
for ts in 1 0.5; do
    "$cz" sim "$cpu" --cost "$tmp/truth.json" --set workload.max_requests="$n" \
        --set workload.time_scale=$ts -o "$tmp/obs_$ts.h5" --quiet
done
t0=$(date +%s.%N)
"$cz" calibrate --observed "$tmp/obs_1.h5" --observed "$tmp/obs_0.5.h5" --config "$cpu" \
    --cost "$tmp/start.json" --fit step,compute,kv,seq,ingest -o "$tmp/fit.json" --quiet
t1=$(date +%s.%N)
python3 - "$tmp/fit.json" "$t0" "$t1" "$n" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
c = f["calibration"]
wall = float(sys.argv[3]) - float(sys.argv[2])
print("calibrate --observed: 2 runs x %s requests, 5 parameters, each run held out: "
      "%.1f s wall (target < 300 s), %d simulations, %.1f ms each"
      % (sys.argv[4], wall, c["evaluations"], 1e3 * c["seconds"] / c["evaluations"]))
for k, p in c["parameters"].items():
    print("  %-8s fitted %.4g (%s), start %.4g" % (k, p["fitted"], p["unit"], p["start"]))
s = f["stages"]["llm"]
print("  per_step_s %.4g (3e-3), per_token_s %.4g (3e-5), ingest_s %.4g (4e-3)"
      % (s["per_step_s"], s["per_token_s"], f["request"]["ingest_s"]))
PY

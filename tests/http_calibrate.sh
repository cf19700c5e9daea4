#!/usr/bin/env bash
# tests/http_calibrate.sh CADENZA SOURCE_ROOT - observe -> replay -> calibrate over HTTP:
# `cadenza serve` on a known cost file (modelled execution) is replayed at two loads, and
# `calibrate --observed` started from another cost recovers the known coefficients (the
# per-step and per-token terms) within 5 %, and the server's request handling; the
# fitted cost's simulator then matches each observed run. Against the engine (tiny model),
# each load is fitted and the other's held-out error reported. Usage errors exit 2 with
# nothing written. `validate --endpoint` sets the server beside the fitted simulator at a
# load not fitted. Prints "N passed, N failed".
#
# A third argument `sanitized` (a build under AddressSanitizer): the served requests cost
# the server itself several times more, which the fit rightly takes into the per-token
# term, so the served recovery is held to 15 % and the engine's runs are left out (its
# unoptimised kernels take minutes); the simulated recovery keeps its 5 %.
set -u
cz=$(realpath "$1")
root=$2
build=${3:-optimized}
# validate's side by side is held to 20 % (35 % sanitized): it times a real server on a
# machine other tests share, and the 10 % target is measured on a quiet one
# (docs/validation.md)
tol=0.05 vtol=0.20
[ "$build" = sanitized ] && tol=0.15 vtol=0.35
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$root" || exit 1
. "$(dirname "$0")/check.sh"
cpu=experiments/engine/cpu.json
stop() {
    kill -TERM "$server"
    wait "$server"
}

# the start: a fitted cost; the truth: its per-step and per-token terms x 1.5 (the
# server's own request handling is real: its HTTP parsing, measured as the ingest term)
cat >"$tmp/start.json" <<'EOF'
{"kind": "fitted", "model": "tiny-llama",
 "stages": {"llm": {"per_step_s": 2e-3, "per_seq_s": 1e-4, "per_token_s": 2e-5,
                    "per_kv_byte_s": 2e-10}}}
EOF
cat >"$tmp/truth.json" <<'EOF'
{"kind": "fitted", "model": "tiny-llama",
 "stages": {"llm": {"per_step_s": 3e-3, "per_seq_s": 1e-4, "per_token_s": 3e-5,
                    "per_kv_byte_s": 2e-10}}}
EOF

# ---- usage ----
check "calibrate --help names --observed" bash -c "'$cz' calibrate --help | grep -q -- '--observed RUN.h5'"
check "--observed without --config is a usage error" expect_exit 2 "$cz" calibrate \
    --observed x.h5 -o "$tmp/u.json"
check "--config without --observed is a usage error" expect_exit 2 "$cz" calibrate \
    --config "$cpu" -o "$tmp/u.json"
check "an unknown --fit parameter is a usage error naming it" bash -c "
    '$cz' calibrate --observed x.h5 --config '$cpu' --fit step,bogus -o '$tmp/u.json' 2>'$tmp/e'
    [ \$? -eq 2 ] && grep -q bogus '$tmp/e' && [ ! -e '$tmp/u.json' ]"
check "profiles and --observed do not mix" expect_exit 2 "$cz" calibrate p.h5 \
    --observed x.h5 --config "$cpu" -o "$tmp/u.json"
check "--max-evals 5 is a usage error" expect_exit 2 "$cz" calibrate --observed x.h5 \
    --config "$cpu" --max-evals 5 -o "$tmp/u.json"
"$cz" sim "$cpu" --set workload.max_requests=5 --quiet --summary "$tmp/nosteps.json" -o "$tmp/sim.h5"
check "a file with no /requests is refused naming it, nothing written" bash -c "
    '$cz' calibrate --observed '$tmp/start.json' --config '$cpu' -o '$tmp/u.json' 2>'$tmp/e'
    [ \$? -eq 2 ] && grep -q start.json '$tmp/e' && [ ! -e '$tmp/u.json' ]"
check "a cost file with an unknown request term is refused" bash -c "
    echo '{\"kind\":\"fitted\",\"model\":\"tiny-llama\",\"stages\":{\"llm\":{}},\"request\":{\"x\":1}}' >'$tmp/bad.json'
    '$cz' sim '$cpu' --cost '$tmp/bad.json' --quiet 2>'$tmp/e'; [ \$? -eq 2 ] && grep -q request '$tmp/e'"

# ---- the simulator applies the request handling: TTFT and E2E grow by it, once ----
"$cz" sim "$cpu" --cost "$tmp/start.json" --set workload.max_requests=5 \
    --set workload.time_scale=20 --quiet --summary "$tmp/s0.json"
python3 - "$tmp/start.json" "$tmp/ingest.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["request"] = {"ingest_s": 0.25}
json.dump(c, open(sys.argv[2], "w"))
EOF
"$cz" sim "$cpu" --cost "$tmp/ingest.json" --set workload.max_requests=5 \
    --set workload.time_scale=20 --quiet --summary "$tmp/s1.json"
check "request.ingest_s adds to every TTFT and E2E, not to TPOT" python3 - "$tmp/s0.json" "$tmp/s1.json" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ("mean_ttft_ms", "mean_e2el_ms"):
    assert abs(b[k] - a[k] - 250) < 1e-6, (k, a[k], b[k])
assert abs(b["mean_tpot_ms"] - a["mean_tpot_ms"]) < 1e-9
EOF

# ---- the simulator's own output on a known cost, request handling included: recover it ----
python3 - "$tmp/start.json" "$tmp/truth_sim.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["stages"]["llm"]["per_step_s"] *= 1.5
c["stages"]["llm"]["per_token_s"] *= 1.5
c["request"] = {"ingest_s": 4e-3}
json.dump(c, open(sys.argv[2], "w"))
EOF
for ts in 1 0.5; do
    "$cz" sim "$cpu" --cost "$tmp/truth_sim.json" --set workload.max_requests=120 \
        --set workload.time_scale=$ts -o "$tmp/sim_$ts.h5" --quiet
done
check "calibrate --observed on simulated runs" "$cz" calibrate --observed "$tmp/sim_1.h5" \
    --observed "$tmp/sim_0.5.h5" --config "$cpu" --cost "$tmp/start.json" \
    -o "$tmp/fit_sim.json" --quiet
check "per step, per token and the request handling come back within 5 %" python3 - "$tmp/fit_sim.json" <<'EOF'
import json, sys
f = json.load(open(sys.argv[1]))
s, r = f["stages"]["llm"], f["request"]
for k, got, want in (("per_step_s", s["per_step_s"], 3e-3), ("per_token_s", s["per_token_s"], 3e-5),
                     ("ingest_s", r["ingest_s"], 4e-3)):
    assert abs(got / want - 1) < 0.05, (k, got, want)
assert r["ingest_per_token_s"] == 0, r
EOF
check "the same fit twice is identical" bash -c "
    '$cz' calibrate --observed '$tmp/sim_1.h5' --observed '$tmp/sim_0.5.h5' --config '$cpu' \
        --cost '$tmp/start.json' -o '$tmp/fit_sim2.json' --quiet &&
    python3 -c \"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for d in (a, b):
    d['calibration'].pop('seconds')
assert a['stages'] == b['stages'] and a['request'] == b['request'] and a['calibration'] == b['calibration']
\" '$tmp/fit_sim.json' '$tmp/fit_sim2.json'"

# ---- the modelled server on the known cost: recover it ----
serve_start "$cpu" --cost "$tmp/truth.json" || exit 1
for ts in 0.5 0.25; do
    check "replay at time scale $ts" "$cz" replay "$cpu" --set workload.max_requests=80 \
        --set workload.time_scale=$ts --endpoint "http://127.0.0.1:$port" \
        -o "$tmp/obs_$ts.h5" --quiet
done
stop
check "calibrate --observed at two loads" "$cz" calibrate --observed "$tmp/obs_0.5.h5" \
    --observed "$tmp/obs_0.25.h5" --config "$cpu" --cost "$tmp/start.json" -o "$tmp/fit.json"
cp "$tmp/out" "$tmp/fit.txt"
check "the known coefficients come back within $tol" python3 - "$tmp/fit.json" "$tol" <<'EOF'
import json, sys
f = json.load(open(sys.argv[1]))
tol = float(sys.argv[2])
s, r = f["stages"]["llm"], f["request"]
for k, want in (("per_step_s", 3e-3), ("per_token_s", 3e-5)):
    assert abs(s[k] / want - 1) < tol, (k, s[k], want)
# a server on loopback parses and queues a request in well under 5 ms
assert 0 <= r["ingest_s"] < 5e-3, r
# the terms it was not asked to fit are the start's
assert s["per_seq_s"] == 1e-4 and s["per_kv_byte_s"] == 2e-10, s
c = f["calibration"]
assert set(c["parameters"]) == {"step", "compute", "ingest"}, c["parameters"]
assert set(c["held_out"]) == set(c["in_sample"]) and len(c["held_out"]) == 2
for run in c["held_out"].values():
    for m in ("ttft", "itl", "e2el"):
        for k in ("median_ape", "p90_ape", "p99_ape", "p50_error", "p90_error", "p99_error"):
            assert run[m][k] is not None, (m, k)
    assert run["e2el"]["median_ape"] < tol, run["e2el"]
EOF
check "the report prints BLIS's table per run" bash -c "
    grep -q 'held out' '$tmp/fit.txt' && grep -q 'P90 error' '$tmp/fit.txt' && grep -q '^ *E2E' '$tmp/fit.txt'"
check "the fitted cost drives sim (the request terms read back)" "$cz" sim "$cpu" \
    --cost "$tmp/fit.json" --set workload.max_requests=10 --quiet

# ---- validate --endpoint: the server and the fitted simulator side by side ----
check "validate --endpoint with --backend is a usage error" expect_exit 2 "$cz" validate \
    "$cpu" --endpoint http://127.0.0.1:1 --backend cpu
check "validate --model without --endpoint is a usage error" expect_exit 2 "$cz" validate \
    "$cpu" --model x
serve_start "$cpu" --cost "$tmp/truth.json" || exit 1
check "validate --endpoint against the modelled server" "$cz" validate "$cpu" \
    --endpoint "http://127.0.0.1:$port" --cost "$tmp/fit.json" \
    --set workload.max_requests=40 --set workload.time_scale=0.35 \
    --summary "$tmp/v.json" --no-progress
cp "$tmp/out" "$tmp/v.txt"
stop
check "a load not fitted: the simulator within $vtol at TTFT's and E2E's P50 and P90, ITL's P50" python3 - "$tmp/v.json" "$vtol" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
vtol = float(sys.argv[2])
assert v["endpoint"].startswith("http://127.0.0.1:") and v["engine_repeats"] == 1, v.keys()
assert v["engine_summaries"][0]["driver"] == "http" and v["sim_summary"]["driver"] == "sim"
assert v["engine_summaries"][0]["completed"] == 40
assert v["requests"]["matched"] == 40, v["requests"]
for k in ("p50_ttft_ms", "p90_ttft_ms", "p50_e2el_ms", "p90_e2el_ms", "p50_itl_ms"):
    e = v["metrics"][k]["rel_error"]
    print(k, round(100 * e, 1))
    assert abs(e) < vtol, (k, v["metrics"][k])
EOF
check "the report labels the server's column" grep -q "server spread" "$tmp/v.txt"
check "one server run: no spread printed, not a nan" bash -c "
    grep -q 'p50_ttft_ms .* -\$' '$tmp/v.txt' && ! grep -qi nan '$tmp/v.txt'"

if [ "$build" = sanitized ]; then
    echo "$pass passed, $fail failed (the engine's runs left out under the sanitizers)"
    [ "$fail" -eq 0 ]
    exit
fi

# ---- the engine: fit one load, held out at the other ----
eng=(--set workload.max_requests=30)
serve_start "$cpu" --execution engine --threads 1 || exit 1
for ts in 1 0.5; do
    check "replay the engine at time scale $ts" "$cz" replay "$cpu" "${eng[@]}" \
        --set workload.time_scale=$ts --endpoint "http://127.0.0.1:$port" \
        -o "$tmp/eng_$ts.h5" --quiet
done
stop
check "calibrate the engine's runs, each held out in turn" "$cz" calibrate \
    --observed "$tmp/eng_1.h5" --observed "$tmp/eng_0.5.h5" --config "$cpu" \
    -o "$tmp/eng_fit.json" --quiet
check "held-out errors for both loads" python3 - "$tmp/eng_fit.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))["calibration"]
assert len(c["held_out"]) == 2
for run, e in c["held_out"].items():
    assert e["requests"] == 30, (run, e["requests"])
    for m in ("ttft", "itl", "e2el"):
        assert e[m]["median_ape"] >= 0, (run, m)
EOF

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

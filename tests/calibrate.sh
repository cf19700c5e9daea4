#!/usr/bin/env bash
# tests/calibrate.sh CADENZA SOURCE_ROOT - the calibration loop: replay results fitted by
# `cadenza calibrate` into a cost file that `sim --cost` and `validate --cost` take, the
# cost file's errors, and `validate`'s report (docs/validation.md). Prints "N passed, N
# failed".
set -u
cz=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
json_num() { # file, python expression on d: prints it
    python3 -c "import json,sys; d=json.load(open('$1')); print($2)"
}
export -f json_num
cpu="$root/experiments/engine/cpu.json"

check "calibrate --help" "$cz" calibrate --help
check "calibrate needs an input" expect_exit 2 "$cz" calibrate -o "$tmp/c.json"
check "calibrate needs -o" expect_exit 2 "$cz" calibrate "$tmp/none.h5"
check "a bad fold count is a usage error" expect_exit 2 "$cz" calibrate x.h5 -o y --folds 1
check "a missing input is an input error" expect_exit 2 "$cz" calibrate "$tmp/none.h5" -o "$tmp/c.json"
echo '{}' >"$tmp/not.h5"
check "a file that is not HDF5 is refused" expect_exit 2 "$cz" calibrate "$tmp/not.h5" -o "$tmp/c.json"
check "... naming it" grep -q "not.h5" "$tmp/cmd.err"
check "... and no cost file is left" test ! -e "$tmp/c.json"
"$cz" sim "$cpu" -o "$tmp/sim.h5" --quiet --no-progress
check "a simulator's results have no executed batches" expect_exit 2 "$cz" calibrate "$tmp/sim.h5" -o "$tmp/c.json"
check "... which the message says" grep -q "replay the config on the engine" "$tmp/cmd.err"

# replay results -> cost file -> the simulator
check "replay 12 requests" "$cz" replay "$cpu" --set workload.max_requests=12 -o "$tmp/r.h5" \
    --quiet --no-progress
check "calibrate the replay's batches" "$cz" calibrate "$tmp/r.h5" -o "$tmp/c.json"
check "the cost file is fitted on tiny-llama" bash -c "[ \"\$(json_num '$tmp/c.json' 'd[\"model\"]')\" = tiny-llama ]"
check "every coefficient is non-negative" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/c.json')); s=d['stages']['llm']; assert len(s)==9 and all(v>=0 for v in s.values()), s\""
check "the report has held-out errors" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/c.json')); h=d['calibration']['held_out']; assert h['rows']>0 and h['median_ape']>=0, h\""
check "sim --cost runs on it" "$cz" sim "$cpu" --cost "$tmp/c.json" --summary "$tmp/s.json" --quiet
check "config cost.file does the same" "$cz" sim "$cpu" --set "cost={\"file\":\"$tmp/c.json\"}" \
    --summary "$tmp/s2.json" --quiet
check "... with the same result" python3 -c "import json; a, b = (json.load(open(f)) for f in ('$tmp/s.json', '$tmp/s2.json')); a.pop('config'); b.pop('config'); assert a == b"
check "a fit of another model is refused" expect_exit 2 "$cz" sim \
    "$root/experiments/engine/omni_barge_in.json" --cost "$tmp/c.json" --quiet
check "... naming both models" grep -q "fitted on model 'tiny-llama'" "$tmp/cmd.err"
python3 - "$tmp/c.json" "$tmp/neg.json" "$tmp/unk.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d['stages']['llm']['per_step_s'] = -1.0
json.dump(d, open(sys.argv[2], 'w'))
d = json.load(open(sys.argv[1]))
d['stages']['llm']['per_wombat_s'] = 1.0
json.dump(d, open(sys.argv[3], 'w'))
PY
check "a negative coefficient is refused" expect_exit 2 "$cz" sim "$cpu" --cost "$tmp/neg.json" --quiet
check "... naming the field" grep -q "per_step_s" "$tmp/cmd.err"
check "an unknown coefficient is refused" expect_exit 2 "$cz" sim "$cpu" --cost "$tmp/unk.json" --quiet
check "... naming it" grep -q "per_wombat_s" "$tmp/cmd.err"

# profile -> calibrate: the quick grid of tiny-llama fitted, its held-out error checked (the
# uncalibrated roofline is off by 50 % and more on these shapes; a fit that works is within
# a few percent, so 15 % leaves room for a noisy machine; under the sanitizers, whose
# instrumentation slows the host's work and the kernels unevenly, 25 %: a held-out median
# of 15.3 % was seen there; and the grid follows a 512-token step budget there, a fifth of
# the tokens)
bound=0.15 small=()
[ "${CZ_TEST_SANITIZED:-0}" = 1 ] && bound=0.25 small=(--set server.max_num_batched_tokens=512)
check "profile --quick" "$cz" profile "$cpu" -o "$tmp/p.h5" --quick "${small[@]}" --no-progress
check "calibrate the profile" "$cz" calibrate "$tmp/p.h5" -o "$tmp/cp.json"
check "held-out median error below $bound" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/cp.json')); h=d['calibration']['held_out']; assert h['rows']>=30 and h['median_ape']<$bound, h\""
check "the host link is fitted" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/cp.json')); l=d['host_link']; assert l['bandwidth_Bps']>1e8, l\""
# validate: the engine twice and the simulator, compared
check "validate with the fitted cost" "$cz" validate "$cpu" --cost "$tmp/c.json" \
    --set workload.max_requests=12 --repeats 2 --summary "$tmp/v.json" -o "$tmp/v.h5" \
    --quiet --no-progress
check "the report compares P90 TTFT" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/v.json')); m=d['metrics']['p90_ttft_ms']; assert m['engine']>0 and m['sim']>0 and abs(m['rel_error']-(m['sim']-m['engine'])/m['engine'])<1e-9 and m['engine_spread']>=0, m\""
check "it sets the cost model against the engine's batches" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/v.json')); s=d['steps']; assert s['n']>0 and 'decode' in s['by_class'], s\""
check "every request is matched" bash -c \
    "[ \"\$(json_num '$tmp/v.json' 'd[\"requests\"][\"matched\"]')\" = 12 ]"
check "both runs' summaries are kept" bash -c \
    "[ \"\$(json_num '$tmp/v.json' 'len(d[\"engine_summaries\"])')\" = 2 ]"
check "the results file holds the engine's batches" "$cz" calibrate "$tmp/v.h5" -o "$tmp/c2.json" --quiet
check "a probe before each run and after the last, each a positive ratio" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/v.json')); r=d['probe']['ratios']; assert len(r)==3 and all(x>0 for x in r) and d['probe']['scale']>0, d['probe']\""
check "the simulator rescaled by the probes, beside the plain one" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/v.json')); m=d['metrics']['p50_tpot_ms']; assert m['sim_rescaled']>0 and abs(m['rel_error_rescaled']-(m['sim_rescaled']-m['engine'])/m['engine'])<1e-9, m\""
check "validate --no-probe" "$cz" validate "$cpu" --cost "$tmp/c.json" --no-probe \
    --set workload.max_requests=2 --repeats 1 --summary "$tmp/v1.json" --quiet --no-progress
check "... has no probe" bash -c \
    "python3 -c \"import json; d=json.load(open('$tmp/v1.json')); assert 'probe' not in d and 'sim_rescaled' not in d['metrics']['p50_ttft_ms']\""
# cost.scale multiplies every fitted step time: one request alone, twice as slow
for sc in 1 2; do
    check "sim with cost.scale $sc" "$cz" sim "$cpu" --set cost.file="$tmp/c.json" \
        --set cost.scale=$sc --set workload.max_requests=1 --summary "$tmp/sc$sc.json" --quiet
done
check "cost.scale 2 doubles a lone request's TPOT" bash -c \
    "python3 -c \"import json; a=json.load(open('$tmp/sc1.json'))['p50_tpot_ms']; b=json.load(open('$tmp/sc2.json'))['p50_tpot_ms']; assert abs(b/a-2)<1e-9, (a,b)\""
check "cost.scale 0 is refused" expect_exit 2 "$cz" sim "$cpu" --set cost.file="$tmp/c.json" \
    --set cost.scale=0
check "validate --repeats 0 is a usage error" expect_exit 2 "$cz" validate "$cpu" --repeats 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

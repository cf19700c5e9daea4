#!/usr/bin/env bash
# tests/plots.sh CADENZA SOURCE_ROOT - `cadenza plot` and `cadenza figures`: the figures of
# a results file and of a sweep exist as PNG and SVG beside their data and script, the data
# hold what the run measured, errors name what is wrong, and `figures --quick --check`
# draws every paper's headline figure and finds the paper's direction in each (and says so
# when a figure does not show it). Needs gnuplot (the README's commands install it).
# Prints "N passed, N failed".
set -u
cz=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }
is_svg() { grep -q '<svg' "$1" && grep -q '</svg>' "$1"; }
figure_ok() { # dir, name: PNG, SVG, script and data, nothing temporary left
    is_png "$1/$2.png" && is_svg "$1/$2.svg" && [ -s "$1/$2.gp" ] && [ -s "$1/$2.dat" ] &&
        ! ls "$1" | grep -q 'tmp'
}

check "plot --help" "$cz" plot --help
check "figures --help" "$cz" figures --help

# a spoken two-stage pipeline with barge-in and offload: latency CDFs, KV tiers, load and
# the stages' tokens
spoken="$root/experiments/liveserve/sharegpt_audio.json"
check "a spoken run writes results" "$cz" sim "$spoken" --set workload.synthetic.requests=60 \
    --set workload.barge_in.p=0.5 -o "$tmp/spoken.h5" --quiet
check "plot RESULTS.h5 exits 0" "$cz" plot "$tmp/spoken.h5" -o "$tmp/sp"
for f in latency_cdf kv_blocks load stage_tokens; do
    check "$f: PNG, SVG, script and data" figure_ok "$tmp/sp" "$f"
done
check "no frames figure without streams" test ! -e "$tmp/sp/frames.png"
# every CDF ends at 1 and is non-decreasing
check "latency_cdf.dat: each CDF rises to 1" awk '
    /^#/ { if (n && last != 1) bad = 1; n = 0; prev = 0; next }
    NF >= 2 && $2 != "NaN" { if ($2 < prev) bad = 1; prev = $2; last = $2; n++ }
    END { if (n && last != 1) bad = 1; exit bad }' "$tmp/sp/latency_cdf.dat"
check "the audio TTFP panel is drawn" grep -q "audio TTFP" "$tmp/sp/latency_cdf.gp"
# the stages' bars carry the summary's generated and heard tokens
"$cz" sim "$spoken" --set workload.synthetic.requests=60 --set workload.barge_in.p=0.5 \
    --summary "$tmp/spoken.json" --quiet
gen=$(python3 -c "import json; print(int(json.load(open('$tmp/spoken.json'))['stages'][1]['generated_tokens']))")
heard=$(python3 -c "import json; print(int(json.load(open('$tmp/spoken.json'))['stages'][1]['heard_tokens']))")
check "stage_tokens.dat: the talker's generated tokens" awk -v want="$gen" '
    /^# block 0/ { b = 0 } /^# block 1/ { b = 1 }
    b == 0 && $1 == 1 { found = ($2 == want) } END { exit !found }' "$tmp/sp/stage_tokens.dat"
check "stage_tokens.dat: the talker's heard tokens (fewer: barge-in)" awk -v want="$heard" -v gen="$gen" '
    /^# block 1/ { b = 1 } b == 1 && $1 == 1 { found = ($2 == want && want < gen) }
    END { exit !found }' "$tmp/sp/stage_tokens.dat"
check "the script redraws the figure by itself" bash -c \
    "cd '$tmp/sp' && rm load.png && gnuplot load.gp && [ -s load.png ]"

# periodic streams behind an AIMD gateway: frame latency, empty frames and the cap
aimd="$root/experiments/metronome/aimd.json"
check "a stream run writes results" "$cz" sim "$aimd" --set workload.streams.duration_s=120 \
    -o "$tmp/aimd.h5" --quiet
check "plot of a stream run exits 0" "$cz" plot "$tmp/aimd.h5" -o "$tmp/st"
check "frames: PNG, SVG, script and data" figure_ok "$tmp/st" frames
check "frames: the admission cap is drawn, finite" bash -c \
    "grep -q 'admission cap' '$tmp/st/frames.gp' && awk '/admission cap/ { on = 1; next } /^# block/ { on = 0 } on && NF == 2 && \$2 != \"NaN\" { n++ } END { exit !(n > 0) }' '$tmp/st/frames.dat'"

# a sweep: one figure per reported metric, the paper's values as points
sweep="$root/experiments/voxserve/sweep_rates.json"
cat >"$tmp/vox.json" <<JSON
{"name": "vox", "base": "$root/experiments/voxserve/tts.json",
 "grid": {"workload.arrivals.rate_rps": [2, 8], "scheduler": ["fcfs", "voxserve"]},
 "report": ["p90_audio_ttfp_ms", "streaming_viability"],
 "paper_values": [{"metric": "p90_audio_ttfp_ms", "x": 4.0, "value": 500, "label": "VoxServe at 4 req/s"}]}
JSON
check "a sweep writes its rows" "$cz" sweep "$tmp/vox.json" -o "$tmp/vox.jsonl" --quiet
check "plot SWEEP.jsonl exits 0" "$cz" plot "$tmp/vox.jsonl" -o "$tmp/sw"
check "one figure per reported metric" bash -c \
    "[ -s '$tmp/sw/sweep_p90_audio_ttfp_ms.png' ] && [ -s '$tmp/sw/sweep_streaming_viability.svg' ]"
check "one line per scheduler" bash -c \
    "grep -q \"title 'fcfs'\" '$tmp/sw/sweep_p90_audio_ttfp_ms.gp' && grep -q \"title 'voxserve'\" '$tmp/sw/sweep_p90_audio_ttfp_ms.gp'"
check "the paper's value is a point at its x" bash -c \
    "grep -q 'paper: VoxServe at 4 req/s' '$tmp/sw/sweep_p90_audio_ttfp_ms.gp' && grep -q '^4 500$' '$tmp/sw/sweep_p90_audio_ttfp_ms.dat'"
check "the metric only where the sweep names it" test ! -e "$tmp/sw/sweep_streaming_viability.dat" -o \
    -z "$(grep paper "$tmp/sw/sweep_streaming_viability.gp")"
check "--metric draws a summary key the sweep did not report" \
    "$cz" plot "$tmp/vox.jsonl" -o "$tmp/sw2" --metric mean_ttft_ms
check "... and only it" bash -c "ls '$tmp/sw2' | grep -q sweep_mean_ttft_ms.png && [ \$(ls '$tmp/sw2' | grep -c png) -eq 1 ]"
check "same rows: byte-identical data and script" bash -c \
    "'$cz' plot '$tmp/vox.jsonl' -o '$tmp/sw3' >/dev/null && cmp '$tmp/sw/sweep_p90_audio_ttfp_ms.dat' '$tmp/sw3/sweep_p90_audio_ttfp_ms.dat' && cmp '$tmp/sw/sweep_p90_audio_ttfp_ms.gp' '$tmp/sw3/sweep_p90_audio_ttfp_ms.gp'"

# errors
check "a missing input exits 2 naming it" bash -c \
    "'$cz' plot '$tmp/nope.h5' -o '$tmp/e1' 2>&1 | grep -q 'nope.h5'; [ \${PIPESTATUS[0]} -eq 2 ]"
check "no -o is a usage error" expect_exit 2 "$cz" plot "$tmp/spoken.h5"
check "an output folder whose parent is missing exits 1 naming -o, before any work" bash -c \
    "'$cz' plot '$tmp/spoken.h5' -o '$tmp/no/such/dir' 2>&1 | grep -q -- \"-o: cannot write the folder '$tmp/no/such/dir'\"; [ \${PIPESTATUS[0]} -eq 1 ]"
check "figures: the same before running anything" bash -c \
    "'$cz' figures --quick -o '$tmp/no/such/dir' 2>&1 | grep -q -- '-o: cannot write'; [ \${PIPESTATUS[0]} -eq 1 ] && [ ! -e '$tmp/no' ]"
echo '{"point": {"a": 1}, "summary": {}}' >"$tmp/bad.jsonl"
echo 'not json' >>"$tmp/bad.jsonl"
check "a bad sweep row exits 2 naming the file and line" bash -c \
    "'$cz' plot '$tmp/bad.jsonl' -o '$tmp/e2' 2>&1 | grep -q 'bad.jsonl:2:'; [ \${PIPESTATUS[0]} -eq 2 ]"
check "an unknown metric exits 2 naming it" bash -c \
    "'$cz' plot '$tmp/vox.jsonl' -o '$tmp/e3' --metric p90_nope 2>&1 | grep -q \"p90_nope\"; [ \${PIPESTATUS[0]} -eq 2 ]"
check "an unknown x key exits 2 naming it" expect_exit 2 "$cz" plot "$tmp/vox.jsonl" -o "$tmp/e4" --x nope
check "a file that is not results exits 2" expect_exit 2 "$cz" plot "$tmp/vox.json" -o "$tmp/e5"
check "without gnuplot: exit 1 saying how to install it" bash -c \
    "CZ_GNUPLOT=/nonexistent/gnuplot '$cz' plot '$tmp/spoken.h5' -o '$tmp/e6' 2>&1 | grep -q 'gnuplot-nox'; [ \${PIPESTATUS[0]} -eq 1 ]"

# the papers' figures, reduced
check "figures --quick --check exits 0" "$cz" figures --quick --check -o "$tmp/figs"
names=$(python3 -c "import json; print(' '.join(f['name'] for f in json.load(open('$root/experiments/figures.json'))['figures']))")
for n in $names; do
    check "$n: PNG, SVG, script and data" figure_ok "$tmp/figs" "$n"
done
for p in liveserve_ voxserve_ metronome_ bros_ nova_; do
    check "a figure of the paper $p" bash -c "ls '$tmp/figs' | grep -q '^$p.*\.png$'"
done
check "figures.json: every figure with the paper's direction" python3 -c "
import json, sys
r = json.load(open('$tmp/figs/figures.json'))
names = '$names'.split()
assert [f['name'] for f in r['figures']] == names, r
assert all(f['as_paper'] for f in r['figures']), r
assert r['quick'] is True"
check "the papers' values are drawn" bash -c "grep -q 'paper: ' '$tmp/figs/voxserve_fig6_ttfa.gp' && grep -q 'paper: ' '$tmp/figs/metronome_fig6a_kv_wall.gp'"
# a figure whose claimed direction is the reverse of what the runs show: reported, and
# --check fails
python3 - "$root/experiments/figures.json" "$tmp/reversed.json" "$root/experiments" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
fig = [f for f in spec["figures"] if f["name"] == "nova_fig10_e2e"][0]
fig["sweep"] = sys.argv[3] + "/" + fig["sweep"]
fig["direction"]["kind"] = "higher"
json.dump({"figures": [fig]}, open(sys.argv[2], "w"))
PY
check "a direction the runs do not show fails --check" expect_exit 1 \
    "$cz" figures --quick --check --spec "$tmp/reversed.json" -o "$tmp/rev"
check "... and is reported as not the paper's" python3 -c "
import json; r = json.load(open('$tmp/rev/figures.json')); assert r['figures'][0]['as_paper'] is False"
check "a figure list named by a relative path finds its sweeps and their bases" bash -c \
    "cp '$root/experiments/figures.json' '$root/experiments/.figures_rel_$$.json' && cd '$root' &&
     '$(realpath "$cz")' figures --quick --only nova_fig10_e2e --spec experiments/.figures_rel_$$.json -o '$tmp/rel' >/dev/null 2>&1;
     rc=\$?; rm -f '$root/experiments/.figures_rel_$$.json'; [ \$rc -eq 0 ] && [ -s '$tmp/rel/nova_fig10_e2e.png' ]"
check "--only names a figure" expect_exit 2 "$cz" figures --quick --only nope -o "$tmp/e7"
python3 - "$root/experiments/figures.json" "$tmp/typo.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["figures"][1]["metirc"] = "p90_audio_ttfp_ms"
json.dump(spec, open(sys.argv[2], "w"))
PY
check "a misspelt field of a figure exits 2 naming the file, figure and field, before any run" bash -c \
    "'$cz' figures --quick --spec '$tmp/typo.json' -o '$tmp/e8' 2>&1 | grep -q \"typo.json: figures\[1\]: unknown field 'metirc'\"; [ \${PIPESTATUS[0]} -eq 2 ] && [ ! -e '$tmp/e8' ]"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

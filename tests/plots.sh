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

# what every figure's drawing guarantees (plots/cz_gnuplot.h)
gp_probe() { # dir, name: gnuplot's x and y range of the figure's last panel, as "xmin ymin"
    (cd "$1" && { cat "$2.gp"; echo 'set print "-"'; echo 'print GPVAL_X_MIN, GPVAL_Y_MIN'; } \
        >".probe_$2.gp" && gnuplot -e "out='.probe_$2'" ".probe_$2.gp" 2>/dev/null | tail -1
     rm -f ".probe_$2".*)
}
nonneg_axes() { # dir, name: the last panel's x and y axes start at 0 or above
    local r
    r=$(gp_probe "$1" "$2")
    set -- $r
    [ $# -eq 2 ] && awk -v x="$1" -v y="$2" 'BEGIN { exit !(x >= 0 && y >= 0) }'
}
key_clear() { # a .gp file: every panel's key below the plot, over a bottom margin that holds
    # the tics, the x label and the most rows of a key (one per entry, at most six), its box
    # with room for an underscore
    python3 - "$1" <<'PY'
import re, sys
body = open(sys.argv[1]).read().split("set output")[1]  # the PNG's commands
panels = body.split("\nreset\n")[1:]
assert panels, "no panel"
rows, margins = 0, []
for p in panels:
    key = re.search(r"^set key (\S+)", p, re.M)
    assert key and key.group(1) == "below", "the key is not below the plot"
    # room in the key's box for descenders: its lower edge would cross out an underscore
    assert re.search(r"^set key below .* height [1-9]", p, re.M), "no room for descenders"
    m = re.search(r"^set bmargin ([0-9.]+)", p, re.M)
    assert m, "no bottom margin for the key"
    margins.append(float(m.group(1)))
    plot = p[p.index("\nplot "):] if "\nplot " in p else ""
    n = len([t for t in re.findall(r" title '((?:[^']|'')*)'", plot) if t])
    rows = max(rows, min(n, 6))
assert all(m >= 3 + 0.9 * rows for m in margins), (margins, rows)
PY
}
# the results figures: a time axis over non-negative data starts at 0, not below
check "frames: the axes do not start below 0" nonneg_axes "$tmp/st" frames
for f in latency_cdf kv_blocks load stage_tokens; do
    check "$f: the key below the plots, clear of the x labels" key_clear "$tmp/sp/$f.gp"
done
check "frames: the key below the plot, clear of the x label" key_clear "$tmp/st/frames.gp"
# a run with --set: every title says what it changed from the shipped config; a run without
# says nothing
want="run with workload.synthetic.requests=60, workload.barge_in.p=0.5 (against experiments/liveserve/sharegpt_audio.json)"
for f in latency_cdf kv_blocks load stage_tokens; do
    check "$f: the title shows the run's --set overrides" grep -qF "$want" "$tmp/sp/$f.gp"
done
check "a run of a shipped config as it is: no overrides in the title" bash -c \
    "'$cz' sim '$root/experiments/voxserve/tts.json' -o '$tmp/tts.h5' --quiet && '$cz' plot '$tmp/tts.h5' -o '$tmp/tts' >/dev/null &&
     grep -q 'voxserve_tts (sim)' '$tmp/tts/latency_cdf.gp' && ! grep -q 'run with' '$tmp/tts/'*.gp"
python3 -c "
import json; c = json.load(open('$spoken')); c['workload']['barge_in'] = {'p': 0.5}
json.dump(c, open('$tmp/my_base.json', 'w'))"
check "--base names the config compared against" bash -c \
    "'$cz' plot '$tmp/spoken.h5' -o '$tmp/sp_base' --base '$tmp/my_base.json' >/dev/null &&
     grep -qF 'run with workload.synthetic.requests=60 (against $tmp/my_base.json)' '$tmp/sp_base/load.gp'"
check "--base that cannot be read exits 2 naming it" bash -c \
    "'$cz' plot '$tmp/spoken.h5' -o '$tmp/sp_base2' --base '$tmp/nope.json' 2>&1 | grep -q -- '--base'; [ \${PIPESTATUS[0]} -eq 2 ]"
check "sweep rows run with --set: the title shows it, not the grid's keys" bash -c \
    "'$cz' sweep '$tmp/vox.json' --set server.max_num_seqs=4 -o '$tmp/vox4.jsonl' --quiet && '$cz' plot '$tmp/vox4.jsonl' -o '$tmp/sw4' >/dev/null &&
     grep -qF 'run with server.max_num_seqs=4 (against experiments/voxserve/tts.json)' '$tmp/sw4/sweep_p90_audio_ttfp_ms.gp' &&
     ! grep -q 'run with' '$tmp/sw/sweep_p90_audio_ttfp_ms.gp'"
# twelve lines: no two drawn alike (ten colours, then dash types)
cat >"$tmp/many.json" <<JSON
{"name": "many", "base": "$root/experiments/voxserve/tts.json",
 "grid": {"server.max_num_seqs": [8, 16], "scheduler": ["fcfs", {"name": "voxserve", "async_pipeline": false}, "voxserve"],
          "workload.arrivals.rate_rps": [2, 4, 6, 8]},
 "report": ["p90_audio_ttfp_ms"]}
JSON
check "a sweep of twelve lines" bash -c \
    "'$cz' sweep '$tmp/many.json' -o '$tmp/many.jsonl' --quiet && '$cz' plot '$tmp/many.jsonl' --x server.max_num_seqs -o '$tmp/many' >/dev/null"
check "twelve lines, twelve distinct styles" python3 -c "
import re
gp = open('$tmp/many/sweep_p90_audio_ttfp_ms.gp').read().split('set output')[1]
styles = re.findall(r\"lc rgb '(#[0-9a-f]{6})' dt (\\d+) pt (\\d+) title\", gp)
assert len(styles) == 12 and len(set(styles)) == 12, styles"
check "twelve lines: the key clear of the x label" key_clear "$tmp/many/sweep_p90_audio_ttfp_ms.gp"

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
assert all(f['direction_ok'] for f in r['figures']), r
assert r['quick'] is True"
# the verdict: the direction and how far each of the paper's numbers is from ours
check "figures.json: each figure's numbers against the paper's, with their ratio" python3 -c "
import json, math
spec = {f['name']: f for f in json.load(open('$root/experiments/figures.json'))['figures']}
for f in json.load(open('$tmp/figs/figures.json'))['figures']:
    want = spec[f['name']]['compare']
    assert len(f['compared']) == len(want) >= 1, f
    assert f['verdict'].startswith('direction matches; '), f
    for c, w in zip(f['compared'], want):
        assert c['what'] == w['what'] and c['quantity'] == w['quantity'], c
        assert c['ours'] is not None and c['ours'] > 0, c
        assert math.isclose(c['ratio'], c['ours'] / c['paper'], rel_tol=1e-9), c
        assert math.isclose(c['relative_difference'], c['ratio'] - 1, rel_tol=1e-9, abs_tol=1e-12), c
        assert (' %s: ' % c['what']) in f['verdict'] and \"vs the paper's\" in f['verdict'], f"
check "Nova Fig. 10: its gain over the best baseline against the paper's 14.6 %" python3 -c "
import json
f = [f for f in json.load(open('$tmp/figs/figures.json'))['figures'] if f['name'] == 'nova_fig10_e2e'][0]
c = f['compared'][0]
assert c['quantity'] == 'max_reduction' and c['paper'] == 0.146, c
# ours: the most, over the rates, of 1 - nova / the lower baseline (the .dat's columns)
blocks = {}
for line in open('$tmp/figs/nova_fig10_e2e.dat'):
    if line.startswith('# block'):
        cur = line.split(\"'\")[1]; blocks[cur] = {}
    elif line.strip():
        x, y = map(float, line.split()[:2]); blocks[cur][x] = y
nova = blocks['nova']
best = max(1 - nova[x] / min(blocks['nova_pf_limit'][x], blocks['nova_chunked_prefill'][x]) for x in nova)
assert abs(c['ours'] - best) < 1e-6, (c, best)
assert \"vs the paper's 14.6 %%: %.3gx\" % (best / 0.146) in f['verdict'], f['verdict']
assert 'ours: ' + f['verdict'] in open('$tmp/figs/nova_fig10_e2e.gp').read().replace('\\\\n', ' ')"
# the seeds a title names are the seeds run: Table V's quick run runs 1-5, as its title says
check "Nova Table V: the title names the seeds run, and they are 1-5" python3 -c "
import json
f = [f for f in json.load(open('$tmp/figs/figures.json'))['figures'] if f['name'] == 'nova_tableV_queueing'][0]
assert f['seeds'] == [1, 2, 3, 4, 5], f
gp = open('$tmp/figs/nova_tableV_queueing.gp').read()
assert 'mean of seeds 1-5, 95 % interval' in gp and '{seeds}' not in gp"
check "figures: no lower bound below 0 drawn on a log axis in the shipped figures" python3 -c "
import re
for n in '$names'.split():
    gp = open('$tmp/figs/%s.gp' % n).read()
    if 'set logscale y' not in gp or 'yerrorlines' not in gp:
        continue
    dat = [l.split() for l in open('$tmp/figs/%s.dat' % n) if l.strip() and not l.startswith('#')]
    neg = any(len(r) == 4 and r[2] != 'NaN' and float(r[2]) <= 0 for r in dat)
    assert not neg or '(\$3 > 0 ? \$3 : \$2)' in gp, n"
# linear axes over non-negative data start at 0 or above (before: -0.2 and -5 from the
# offsets); underscores are underscores (no enhanced text), the key clear of the x label
check "liveserve_fig16: the axes start at 0 or above" nonneg_axes "$tmp/figs" liveserve_fig16_waste_ratio
check "metronome_fig6a: the axes start at 0 or above" nonneg_axes "$tmp/figs" metronome_fig6a_kv_wall
check "voxserve_fig6: the axes start at 0 or above" nonneg_axes "$tmp/figs" voxserve_fig6_ttfa
for n in $names; do
    check "$n: the key below the plot, clear of the x label" key_clear "$tmp/figs/$n.gp"
    check "$n: no enhanced text" bash -c "! grep -Eq '(^|[^o])enhanced' '$tmp/figs/$n.gp'"
done
check "underscores drawn as underscores (SVG text)" bash -c \
    "grep -q '>paper: first-order t_sat 145 s<' '$tmp/figs/metronome_fig6a_kv_wall.svg' &&
     grep -q '>barge-in probability p_bi<' '$tmp/figs/liveserve_fig16_waste_ratio.svg'"
check "the papers' points of one figure in distinct shapes" python3 -c "
import re
gp = open('$tmp/figs/metronome_fig6a_kv_wall.gp').read().split('set output')[1]
pts = re.findall(r\"with points pt (\\d+) ps 2.2 lw 2.5 lc rgb '#000000' title 'paper: \", gp)
assert len(pts) == 2 and len(set(pts)) == 2, pts"
check "a figure's title shows its --set overrides" bash -c \
    "grep -qF 'run with workload.synthetic.requests=120 (against liveserve/sharegpt_audio.json)' '$tmp/figs/liveserve_fig16_waste_ratio.gp' &&
     grep -qF 'unbounded: run with workload.streams.count=128 (against metronome/unbounded.json)' '$tmp/figs/metronome_fig6a_kv_wall.gp'"
# two seeds (a t interval over one degree of freedom): the lower bounds go below 0; the log
# axis draws none of them, says so, and the title names the two seeds
python3 - "$root/experiments/figures.json" "$tmp/two_seeds.json" "$root/experiments" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
fig = [f for f in spec["figures"] if f["name"] == "nova_tableV_queueing"][0]
fig["sweep"] = sys.argv[3] + "/" + fig["sweep"]
fig["quick"] = {"seeds": [1, 2]}
json.dump({"figures": [fig]}, open(sys.argv[2], "w"))
PY
check "two seeds: figures runs" "$cz" figures --quick --spec "$tmp/two_seeds.json" -o "$tmp/two"
check "two seeds: some lower bound is below 0 (the data keep it)" awk \
    '/^# block 0/ { on = 1; next } /^# block/ { on = 0 } on && NF == 4 && $3 < 0 { n++ } END { exit !(n > 0) }' \
    "$tmp/two/nova_tableV_queueing.dat"
check "two seeds: the log axis draws no lower bound at or below 0, and says so" bash -c \
    "grep -qF 'using 1:2:(\$3 > 0 ? \$3 : \$2):4 with yerrorlines' '$tmp/two/nova_tableV_queueing.gp' &&
     grep -q 'its lower bound is not drawn' '$tmp/two/nova_tableV_queueing.gp'"
check "two seeds: the title names seeds 1 and 2, figures.json the same" bash -c \
    "grep -q 'mean of seeds 1 and 2, 95 % interval' '$tmp/two/nova_tableV_queueing.gp' &&
     python3 -c \"import json; assert json.load(open('$tmp/two/figures.json'))['figures'][0]['seeds'] == [1, 2]\""
python3 - "$root/experiments/figures.json" "$tmp/fixed_seeds.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
for f in spec["figures"]:
    if "title" in f:
        f["title"] = f["title"].replace("{seeds}", "seeds 1-5")
json.dump(spec, open(sys.argv[2], "w"))
PY
check "a title that names seeds by number exits 2, before any run" bash -c \
    "'$cz' figures --quick --spec '$tmp/fixed_seeds.json' -o '$tmp/e9' 2>&1 | grep -q 'name the seeds as {seeds}'; [ \${PIPESTATUS[0]} -eq 2 ] && [ ! -e '$tmp/e9' ]"
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
import json; f = json.load(open('$tmp/rev/figures.json'))['figures'][0]
assert f['direction_ok'] is False and f['verdict'].startswith('direction does NOT match; '), f"
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
python3 - "$root/experiments/figures.json" "$tmp/bad_compare.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["figures"][4]["compare"][0]["quantity"] = "max_reducton"
json.dump(spec, open(sys.argv[2], "w"))
PY
check "a comparison of an unknown quantity exits 2 naming it, before any run" bash -c \
    "'$cz' figures --quick --spec '$tmp/bad_compare.json' -o '$tmp/e10' 2>&1 | grep -q \"compare\\[0\\]: quantity 'max_reducton'\"; [ \${PIPESTATUS[0]} -eq 2 ] && [ ! -e '$tmp/e10' ]"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

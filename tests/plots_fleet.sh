#!/usr/bin/env bash
# tests/plots_fleet.sh CADENZA H5TABLE SOURCE_ROOT - `cadenza plot` of a fleet: a stage of
# more than 8 replicas draws `load` and `kv_blocks` as distributions over its replicas per
# time bin (the 10-90 % band, the median, the max; the fleet's totals beside them) and a
# `replica_balance` figure of each replica's time-averaged load, sorted, against the fleet's
# mean; a stage of up to 8 replicas keeps the totals over time it had. The numbers in the
# .dat files are checked against the /timeline rows recomputed here (a replica's value at a
# bin: its latest row at or before it). Needs gnuplot. Prints "N passed, N failed".
set -u
cz=$1
h5table=$2
root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }
figure_ok() { # dir, name: PNG, SVG, script and data, nothing temporary left
    is_png "$1/$2.png" && grep -q '</svg>' "$1/$2.svg" && [ -s "$1/$2.gp" ] && [ -s "$1/$2.dat" ] &&
        ! ls "$1" | grep -q 'tmp'
}
fleet() { # replicas, file: a config of Llama-3-8B replicas on H100s, round-robin routed,
    # a few hundred requests at a Poisson rate that queues them (8 sequences a replica),
    # 4,096 KV blocks a replica (so KV use is drawn as a share of the pool)
    cat >"$2" <<JSON
{"name": "fleet_$1", "seed": 1, "model": "llama-3-8b", "hardware": "h100-sxm",
 "router": "round_robin",
 "pipeline": {"llm": {"replicas": $1}},
 "server": {"max_num_seqs": 8, "kv_blocks": 4096},
 "workload": {"synthetic": {"requests": 300,
     "input_tokens": {"dist": "uniform", "min": 200, "max": 2000},
     "output_tokens": {"dist": "uniform", "min": 50, "max": 400}},
   "arrivals": {"process": "poisson", "rate_rps": 150}},
 "sim": {"timeline_interval_s": 0.5}}
JSON
}

fleet 20 "$tmp/f20.json"
check "a fleet of 20 replicas writes results" "$cz" sim "$tmp/f20.json" -o "$tmp/f20.h5" --quiet
"$h5table" "$tmp/f20.h5" timeline >"$tmp/f20.tl"
check "/timeline: rows of all 20 replicas, in time order" awk -F'\t' '
    NR == 1 { next } { if ($1 + 0 < prev) bad = 1; prev = $1 + 0; seen[$3] = 1 }
    END { n = 0; for (r in seen) n++; exit bad || n != 20 }' "$tmp/f20.tl"
# a replica writes at most one row per 0.5 s interval as it steps, besides a row when it
# falls idle (nothing running or waiting) and the first when it has work again; the run
# drains, so every replica's last row shows it idle
check "/timeline: one stepping row per replica per 0.5 s bin, idle periods apart; every replica ends idle" awk -F'\t' '
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { k = ($1 + 0 == 0) ? 0 : int($1 / 0.5 - 1e-9) + 1; r = $3
      idle = $c["running"] == 0 && $c["waiting"] == 0
      if (!idle && !was_idle[r] && ++per[k "," r] > 1) bad = 1
      if (idle && r in was_idle && was_idle[r]) bad = 1   # two idle rows in a row
      was_idle[r] = idle; idles += idle; rows++ }
    END { for (r in was_idle) if (!was_idle[r]) bad = 1
          exit bad || rows < 100 || idles < 20 }' "$tmp/f20.tl"
check "plot of the fleet exits 0" "$cz" plot "$tmp/f20.h5" -o "$tmp/f20"
for f in latency_cdf kv_blocks load replica_balance; do
    check "$f: PNG, SVG, script and data" figure_ok "$tmp/f20" "$f"
done
check "the fleet's load is drawn as bands (filledcurves), four panels" bash -c \
    "grep -q 'with filledcurves' '$tmp/f20/load.gp' && [ \$(grep -c '^# block' '$tmp/f20/load.dat') -eq 12 ]"

# every distribution against the rows: per bin of 0.5 s, each replica's latest row at or
# before the bin's time, the percentiles interpolated between order statistics
cat >"$tmp/check.py" <<'PY'
import math, re, sys

def rows(path):
    out = []
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            v = dict(zip(head, line.rstrip("\n").split("\t")))
            out.append(v)
    return out

def blocks(path):
    """The .dat's blocks: [(label, [[numbers...], ...])]."""
    out = []
    for line in open(path):
        m = re.match(r"# block \d+: panel \d+, series '(.*)'$", line)
        if m:
            out.append((m.group(1), []))
        elif line.strip() and out:
            out[-1][1].append([float(x) for x in line.split()])
    return out

def pct(vals, p):
    s = sorted(vals)
    h = p * (len(s) - 1)
    k = int(h)
    return s[k] + (h - k) * (s[k + 1] - s[k]) if k + 1 < len(s) else s[k]

def close(a, b):
    return abs(a - b) <= 1e-6 * (1 + abs(b))

def fleet_check(tl_path, dat_path, kind, n_rep, interval, pool):
    tl = rows(tl_path)
    t_end = float(tl[-1]["t_s"])
    n_bins = math.ceil(t_end / interval - 1e-9) + 1
    cols = {"load": ["running", "waiting", "batch_tokens"], "kv": ["kv_blocks_used"]}[kind]
    scale = {"kv_blocks_used": 100.0 / pool}
    b = blocks(dat_path)
    per_panel = 3  # band, median, max
    # the expected distributions, bin by bin
    cur = {c: [0.0] * n_rep for c in cols}
    want = {c: [] for c in cols}
    i = 0
    for k in range(n_bins):
        t = k * interval
        while i < len(tl) and float(tl[i]["t_s"]) <= t + 1e-12:
            r = int(tl[i]["replica"])
            for c in cols:
                cur[c][r] = float(tl[i][c]) * scale.get(c, 1.0)
            i += 1
        if k == n_bins - 1:  # the last bin holds every row
            while i < len(tl):
                r = int(tl[i]["replica"])
                for c in cols:
                    cur[c][r] = float(tl[i][c]) * scale.get(c, 1.0)
                i += 1
        for c in cols:
            v = cur[c]
            want[c].append((pct(v, .1), pct(v, .5), pct(v, .9), max(v)))
    for ci, c in enumerate(cols):
        band, med, mx = b[ci * per_panel: ci * per_panel + 3]
        assert band[0].startswith("10-90") and med[0] == "median replica" and "max" in mx[0], (band[0], med[0], mx[0])
        # one row per bin, at k * interval, in every block
        for blk in (band, med, mx):
            assert len(blk[1]) == n_bins, (c, blk[0], len(blk[1]), n_bins)
            for k, row in enumerate(blk[1]):
                assert close(row[0], k * interval), (c, k, row)
        for k in range(n_bins):
            t, m, lo, hi = band[1][k]
            top = mx[1][k][1]
            assert lo <= m <= hi <= top + 1e-9, (c, k, lo, m, hi, top)
            assert close(med[1][k][1], m), (c, k)
            w = want[c][k]
            assert close(lo, w[0]) and close(m, w[1]) and close(hi, w[2]) and close(top, w[3]), (c, k, (lo, m, hi, top), w)
        if c == "kv_blocks_used":
            assert all(0 <= r[3] <= 100 for r in band[1]) and all(0 <= r[1] <= 100 for r in mx[1])
    # the fleet's totals: the sum over replicas at each bin
    tot = b[len(cols) * per_panel]
    assert len(tot[1]) == n_bins
    return n_bins

def balance_check(tl_path, dat_path, gp_path, n_rep, pool):
    tl = rows(tl_path)
    t_end = float(tl[-1]["t_s"])
    area = {c: [0.0] * n_rep for c in ("running", "kv_blocks_used")}
    cur = {c: [0.0] * n_rep for c in area}
    last = [0.0] * n_rep
    for row in tl:
        r, t = int(row["replica"]), float(row["t_s"])
        for c in area:
            area[c][r] += cur[c][r] * (t - last[r])
            cur[c][r] = float(row[c])
        last[r] = t
    b = blocks(dat_path)
    assert len(b) == 2, [x[0] for x in b]
    gp = open(gp_path).read()
    for (label, pts), c, scale in zip(b, ("running", "kv_blocks_used"), (1.0, 100.0 / pool)):
        means = sorted((area[c][r] + cur[c][r] * (t_end - last[r])) / t_end * scale for r in range(n_rep))
        # one step per replica, sorted, and the last step's end at n
        assert len(pts) == n_rep + 1, (c, len(pts))
        assert [p[0] for p in pts] == list(range(n_rep + 1)), c
        ys = [p[1] for p in pts[:n_rep]]
        assert ys == sorted(ys) and pts[n_rep][1] == ys[-1], c
        assert all(close(a, w) for a, w in zip(ys, means)), (c, ys, means)
        mean = sum(means) / n_rep
        shown = ("%.0f" if 1000 <= mean < 1e9 else "%.3g") % mean
        assert "fleet mean %s;" % shown in gp, (c, mean)
        assert label.startswith("replicas (max: replica "), label
    assert "replica balance, llm (%d replicas), router round_robin" % n_rep in gp
    assert "set xrange [0:%d]" % n_rep in gp

if __name__ == "__main__":  # (the rates check below imports the helpers)
    what = sys.argv[1]
    if what == "fleet":
        fleet_check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), 0.5, 4096)
    elif what == "balance":
        balance_check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), 4096)
PY
check "load.dat: per bin, 10th <= median <= 90th <= max of running, waiting, batch tokens, as the rows give them" \
    python3 "$tmp/check.py" fleet "$tmp/f20.tl" "$tmp/f20/load.dat" load 20
check "kv_blocks.dat: the same of KV blocks used, in % of the 4,096-block pool" \
    python3 "$tmp/check.py" fleet "$tmp/f20.tl" "$tmp/f20/kv_blocks.dat" kv 20
check "some replica waited (the bands are not all zero)" awk '
    /^# block 3:/ { on = 1; next } /^# block/ { on = 0 } on && NF == 4 && $4 > 0 { n++ } END { exit !(n > 0) }' \
    "$tmp/f20/load.dat"
check "replica_balance: each replica's time-averaged running requests and KV use, sorted, with the fleet's mean" \
    python3 "$tmp/check.py" balance "$tmp/f20.tl" "$tmp/f20/replica_balance.dat" "$tmp/f20/replica_balance.gp" 20
check "the fleet's panels: y from 0, KV share up to 100 %" bash -c \
    "grep -q '^set yrange \[0:\*\]' '$tmp/f20/load.gp' && grep -q '^set yrange \[0:100\]' '$tmp/f20/kv_blocks.gp'"
check "every panel's key below the plot" python3 -c "
import re
for f in ('load', 'kv_blocks', 'replica_balance'):
    body = open('$tmp/f20/%s.gp' % f).read().split('set output')[1]
    panels = body.split('\nreset\n')[1:]
    assert panels and all(re.search(r'^set key below ', p, re.M) for p in panels), f
    assert all(re.search(r'^set bmargin [0-9.]+', p, re.M) for p in panels), f"
check "the band takes its median's colour" python3 -c "
import re
gp = open('$tmp/f20/load.gp').read().split('set output')[1]
pairs = re.findall(r\"filledcurves fs transparent solid [0-9.]+ noborder lc rgb '(#[0-9a-f]+)' title '10-90 % of replicas'.*?\n.*?with lines lw 2 lc rgb '(#[0-9a-f]+)'\", gp)
assert len(pairs) == 3, pairs
for band, line in pairs:
    assert band == line, (band, line)"

# the boundary: 8 replicas keep the totals, 9 are a fleet
fleet 8 "$tmp/f8.json"
fleet 9 "$tmp/f9.json"
check "8 and 9 replicas run" bash -c \
    "'$cz' sim '$tmp/f8.json' -o '$tmp/f8.h5' --quiet && '$cz' sim '$tmp/f9.json' -o '$tmp/f9.h5' --quiet &&
     '$cz' plot '$tmp/f8.h5' -o '$tmp/f8' >/dev/null && '$cz' plot '$tmp/f9.h5' -o '$tmp/f9' >/dev/null"
check "8 replicas: totals over time, no bands, no replica_balance" bash -c \
    "! grep -q filledcurves '$tmp/f8/load.gp' && [ ! -e '$tmp/f8/replica_balance.png' ]"
check "9 replicas: bands and replica_balance" bash -c \
    "grep -q filledcurves '$tmp/f9/load.gp' && [ -s '$tmp/f9/replica_balance.png' ]"

# two replicas: the figures as before, the totals stepping at every row of the stage
fleet 2 "$tmp/f2.json"
check "two replicas: sim and plot" bash -c \
    "'$cz' sim '$tmp/f2.json' -o '$tmp/f2.h5' --quiet && '$cz' plot '$tmp/f2.h5' -o '$tmp/f2' >/dev/null"
for f in latency_cdf kv_blocks load; do
    check "two replicas: $f drawn" figure_ok "$tmp/f2" "$f"
done
check "two replicas: no replica_balance, no bands" bash -c \
    "[ ! -e '$tmp/f2/replica_balance.png' ] && ! grep -q filledcurves '$tmp/f2/load.gp' '$tmp/f2/kv_blocks.gp'"
"$h5table" "$tmp/f2.h5" timeline >"$tmp/f2.tl"
check "two replicas: load.dat holds the sum over replicas at each row, as steps" python3 - "$tmp/f2.tl" "$tmp/f2/load.dat" "$tmp/f2/load.gp" <<'PY'
import re, sys
head, *lines = open(sys.argv[1]).read().splitlines()
head = head.split("\t")
last, want = {}, {"running": [], "waiting": [], "batch_tokens": []}
for line in lines:
    v = dict(zip(head, line.split("\t")))
    last[v["replica"]] = v
    for c in want:
        want[c].append((float(v["t_s"]), sum(float(x[c]) for x in last.values())))
got, cur = [], None
for line in open(sys.argv[2]):
    if line.startswith("# block"):
        cur = []
        got.append(cur)
    elif line.strip():
        cur.append(tuple(float(x) for x in line.split()))
assert len(got) == 3, len(got)
for g, c in zip(got, ("running", "waiting", "batch_tokens")):
    assert len(g) == len(want[c]), (c, len(g), len(want[c]))
    # (h5table prints 9 significant digits)
    assert all(abs(a[0] - b[0]) <= 1e-7 * (1 + b[0]) and a[1] == b[1] for a, b in zip(g, want[c])), c
assert len(re.findall(r"with steps", open(sys.argv[3]).read())) == 6  # PNG and SVG
PY

# a disaggregated fleet with prefix caching (the Mooncake slice, 12 prefill and 10 decode
# replicas): prefix_cache and kv_transfers, per pool, the pool's rate over each interval of
# `stride` bins and its distribution over replicas, checked against the rows' running totals
cat >"$tmp/pd.json" <<JSON
{"name": "pd_fleet", "seed": 1, "model": "llama-3-8b", "hardware": "h100-sxm",
 "router": "llm_d",
 "disaggregation": {"prefill": {"replicas": 12}, "decode": {"replicas": 10}},
 "server": {"max_num_seqs": 64, "kv_blocks": 4096, "prefix_caching": true, "max_model_len": 0},
 "workload": {"trace": {"path": "$root/traces/data/mooncake_conversation/conversation_trace_head.jsonl",
                        "format": "mooncake"}, "max_requests": 300},
 "sim": {"timeline_interval_s": 0.5}}
JSON
check "a disaggregated fleet: sim and plot" bash -c \
    "'$cz' sim '$tmp/pd.json' -o '$tmp/pd.h5' --summary '$tmp/pd.s.json' --quiet && '$cz' plot '$tmp/pd.h5' -o '$tmp/pd' >/dev/null"
for f in prefix_cache kv_transfers; do
    check "disaggregated: $f drawn" figure_ok "$tmp/pd" "$f"
done
check "no pool moves KV in a colocated run, no prefix cache: neither figure" bash -c \
    "[ ! -e '$tmp/f20/prefix_cache.png' ] && [ ! -e '$tmp/f20/kv_transfers.png' ]"
"$h5table" "$tmp/pd.h5" timeline >"$tmp/pd.tl"
check "prefix_cache.dat and kv_transfers.dat: each pool's rates and their spread over replicas, as the rows' running totals give them" \
    python3 - "$tmp/pd.tl" "$tmp/pd/prefix_cache.dat" "$tmp/pd/kv_transfers.dat" "$tmp/pd.s.json" "$tmp" <<'PY'
import json, math, sys
sys.path.insert(0, sys.argv[5])
from check import blocks, pct, rows
from check import close as close_num
tl = rows(sys.argv[1])
def close(a, b):  # NaN (no rate in the interval) matches NaN only
    return math.isnan(a) if math.isnan(b) else close_num(a, b)
interval, n_rep = 0.5, {"decode": 10, "prefill": 12}
t_end = float(tl[-1]["t_s"])
n_bins = math.ceil(t_end / interval - 1e-9) + 1
stride = (n_bins + 99) // 100
assert stride >= 2, stride  # the intervals span several bins
cols = ("prefix_queries", "prefix_hits", "kv_pulled_tokens", "kv_sent_tokens")
cur = {p: [[0.0] * 4 for _ in range(n_rep[p])] for p in n_rep}
snaps = []  # per rate sample: the replicas' running totals
i = 0
for k in range(n_bins):
    while i < len(tl) and (float(tl[i]["t_s"]) <= k * interval + 1e-12 or k == n_bins - 1):
        cur[tl[i]["stage"]][int(tl[i]["replica"])] = [float(tl[i][c]) for c in cols]
        i += 1
    if k % stride == 0:
        snaps.append({p: [list(r) for r in cur[p]] for p in cur})
pc, kt = blocks(sys.argv[2]), blocks(sys.argv[3])
# prefix_cache: per pool band, median, max, fleet, lookups; kv_transfers: band, median, max, total
assert [b[0] for b in pc] == ["10-90 % of replicas", "median replica", "best replica (max)", "fleet",
                              "tokens looked up (right axis)"] * 2, [b[0] for b in pc]
assert [b[0] for b in kt] == ["10-90 % of replicas", "median replica", "busiest replica (max)",
                              "fleet total"] * 2, [b[0] for b in kt]
dt = interval * stride
for pi, pool in enumerate(("decode", "prefill")):
    band, med, mx, fleet, looked = pc[5 * pi: 5 * pi + 5]
    kband, kmed, kmx, ktot = kt[4 * pi: 4 * pi + 4]
    for blk in (band, med, mx, fleet, looked, kband, kmed, kmx, ktot):
        assert len(blk[1]) == len(snaps), (pool, blk[0], len(blk[1]), len(snaps))
    for j in range(len(snaps)):
        now, prev = snaps[j][pool], snaps[j - 1][pool] if j else [[0.0] * 4] * n_rep[pool]
        assert close(band[1][j][0], j * dt), (pool, j)
        rates = [100 * (a[1] - b[1]) / (a[0] - b[0]) for a, b in zip(now, prev) if a[0] > b[0]]
        want = (pct(rates, .1), pct(rates, .5), pct(rates, .9), max(rates)) if rates else (math.nan,) * 4
        got = (band[1][j][2], band[1][j][1], band[1][j][3], mx[1][j][1])
        assert all(close(g, w) for g, w in zip(got, want)), (pool, j, got, want)
        dq = sum(a[0] for a in now) - sum(b[0] for b in prev)
        dh = sum(a[1] for a in now) - sum(b[1] for b in prev)
        assert close(fleet[1][j][1], 100 * dh / dq if dq > 0 else math.nan), (pool, j)
        assert close(looked[1][j][1], dq / dt if j else 0), (pool, j)
        moved = [((a[2] + a[3]) - (b[2] + b[3])) / dt if j else 0 for a, b in zip(now, prev)]
        got = (kband[1][j][2], kband[1][j][1], kband[1][j][3], kmx[1][j][1], ktot[1][j][1])
        want = (pct(moved, .1), pct(moved, .5), pct(moved, .9), max(moved), sum(moved))
        assert all(close(g, w) for g, w in zip(got, want)), (pool, j, got, want)
# the decode pool pulls, the prefill pool sends, and both moved KV; the prefill pool's hit
# rate over the run is the summary's
last = snaps[-1]
assert sum(r[2] for r in last["decode"]) > 0 and sum(r[3] for r in last["decode"]) == 0
assert sum(r[3] for r in last["prefill"]) > 0 and sum(r[2] for r in last["prefill"]) == 0
st = {s["stage"]: s for s in json.load(open(sys.argv[4]))["stages"]}
q = sum(r[0] for r in last["prefill"]); h = sum(r[1] for r in last["prefill"])
assert 0 < q <= st["prefill"]["prefix_cache_queries"] and h <= st["prefill"]["prefix_cache_hits"]
assert abs(h / q - st["prefill"]["prefix_cache_hit_rate"]) < 0.02, (h / q, st["prefill"]["prefix_cache_hit_rate"])
PY

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# tests/bench_profile_noise.sh CADENZA SOURCE_ROOT [RUNS] - how well `profile --quick` and
# `calibrate` fit the CPU engine when something else shares the machine (docs/engine.md,
# "Profiling"): RUNS profiles (default 3) on a quiet machine, then RUNS while another
# process takes one core 2 s in every 5, each fitted by `calibrate`. Prints, per run, the
# held-out median and p90 error and the profile's wall time, then the median of each set.
set -eu
cz=$(realpath "$1")
root=$2
runs=${3:-3}
tmp=$(mktemp -d)
busy=
cleanup() {
    [ -n "$busy" ] && kill "$busy" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$root"
cpu=experiments/engine/cpu.json

one() { # label i
    local t0 t1
    t0=$(date +%s.%N)
    "$cz" profile "$cpu" -o "$tmp/p.h5" --quick --no-progress >/dev/null 2>&1
    t1=$(date +%s.%N)
    "$cz" calibrate "$tmp/p.h5" -o "$tmp/c.json" --quiet
    python3 - "$tmp/c.json" "$1" "$2" "$t0" "$t1" <<'PY' | tee -a "$tmp/$1.txt"
import json, sys
h = json.load(open(sys.argv[1]))['calibration']['held_out']
print('%-6s run %s  held-out median %5.1f %%  p90 %5.1f %%  profile %5.1f s' % (
    sys.argv[2], sys.argv[3], 100 * h['median_ape'], 100 * h['p90_ape'],
    float(sys.argv[5]) - float(sys.argv[4])))
PY
}

for i in $(seq 1 "$runs"); do one quiet "$i"; done
# one core busy 2 s in every 5, for as long as the noisy runs last
bash -c 'while :; do timeout 2 sh -c "while :; do :; done"; sleep 3; done' &
busy=$!
for i in $(seq 1 "$runs"); do one noisy "$i"; done
kill "$busy"
busy=
for set in quiet noisy; do
    awk '{ print $6 }' "$tmp/$set.txt" | sort -g | awk -v s="$set" '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%s: the median of %d runs\x27 held-out median errors: %.1f %%\n", s, NR, m }'
done

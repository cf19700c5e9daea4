#!/usr/bin/env bash
# tests/bench_fleet.sh CADENZA SOURCE_ROOT [REQUESTS] - the simulator on a fleet
# (experiments/bench/fleet.json): 1, 10, 100, 1,000 and 10,000 replicas of Llama-3-8B at
# 70 % load, REQUESTS requests each (default 1,000,000), routed by least outstanding
# requests; wall time, events per second and peak memory of each (cadenza's own run
# statistics), and the wall time per million requests. One core. Run by
# `meson test -C build --benchmark -v fleet`; the figures are in the README.
set -u
cz=$(realpath "$1")
root=$(realpath "$2")
n=${3:-1000000}
cd "$root" || exit 1
st=0
printf '%-9s %-10s %-60s\n' replicas requests "cadenza's run line"
for reps in 1 10 100 1000 10000; do
    rate=$(awk -v r="$reps" 'BEGIN { printf "%.1f", 16.4 * r }')
    line=$("$cz" sim experiments/bench/fleet.json --no-progress --summary /dev/null \
        --set pipeline.llm.replicas=$reps --set workload.arrivals.rate_rps=$rate \
        --set workload.synthetic.requests=$n 2>&1 >/dev/null | grep '^run:') ||
        { echo "$reps replicas: failed"; st=1; continue; }
    printf '%-9s %-10s %s\n' "$reps" "$n" "$line"
done
exit $st

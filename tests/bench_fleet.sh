#!/usr/bin/env bash
# tests/bench_fleet.sh CADENZA SOURCE_ROOT [REQUESTS] - the simulator on a fleet
# (experiments/bench/fleet.json): 1, 10, 100, 1,000 and 10,000 replicas of Llama-3-8B at
# 70 % load, REQUESTS requests each (default 1,000,000), routed by least outstanding
# requests; wall time, events per second and peak memory of each (cadenza's own run
# statistics), and the wall time per million requests. One core. Run by
# `meson test -C build --benchmark -v fleet`; the figures are in the README.
#
# With CZ_BENCH_DAY=N (a number of requests, 100000000 for a whole day) it also runs a
# simulated day of 1,000 replicas at 1,157.4 requests/s (10^8 a day), Poisson: (a) single
# requests of Azure conversation lengths (fleet.json), (b) multi-turn sessions at the same
# rate of turns (fleet_sessions.json: 289.35 sessions/s of 4 turns on average), each with
# the fast-forward (sim.fast_forward, the default: decode-only steps skip the dispatch and
# the steps bound to follow are one event, a decode run) and without it (every step through
# the runtime's dispatch), N requests each; and says how long a day would take at that
# pace.
set -u
cz=$(realpath "$1")
root=$(realpath "$2")
n=${3:-1000000}
cd "$root" || exit 1
st=0
day=${CZ_BENCH_DAY:-}
if [ -n "$day" ]; then
    printf '%-16s %-5s %-10s %-60s\n' day ff requests "cadenza's run line"
    for cfg in fleet fleet_sessions; do
        rate=1157.4
        [ "$cfg" = fleet_sessions ] && rate=289.35
        for ff in true false; do
            line=$("$cz" sim experiments/bench/$cfg.json --no-progress --summary /dev/null \
                --set workload.arrivals.rate_rps=$rate --set workload.synthetic.requests="$day" \
                --set sim.fast_forward=$ff 2>&1 >/dev/null | grep '^run:') ||
                { echo "$cfg (fast_forward $ff): failed"; st=1; continue; }
            printf '%-16s %-5s %-10s %s\n' "$cfg" "$ff" "$day" "$line"
            echo "$line" | awk -v n="$day" '{ for (i = 1; i < NF; i++) if ($(i + 1) == "s" && $(i + 2) == "wall") w = $i;
                printf "    a day (10^8 requests) at this pace: %.0f s\n", w * 1e8 / n }'
        done
    done
fi
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

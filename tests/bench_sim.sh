#!/usr/bin/env bash
# tests/bench_sim.sh CADENZA SOURCE_ROOT [--runs N] [--against OTHER_CADENZA] - the
# simulator's speed on experiments/bench/sim_100k_1h.json (target: 3 M events/s on one
# core) and experiments/bench/vidur_readme_10k.json (Vidur's README workload with 10,000
# requests; the README's 512 take a few milliseconds). A run lasts tens of milliseconds, so
# each workload runs N times (default 15) and the median, best and worst events per second
# are printed, with wall time and peak memory. With --against, each run of CADENZA is
# paired with one of OTHER_CADENZA (another build, run in turn so both see the machine
# alike) and the median of the pairs' ratios is printed too: the way to compare two builds
# on a machine whose speed drifts. Run by `meson test -C build --benchmark -v sim`.
set -u
usage() {
    echo "usage: $0 CADENZA SOURCE_ROOT [--runs N] [--against OTHER_CADENZA]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
cz=$(realpath "$1")
root=$(realpath "$2")
shift 2
runs=15 other=
while [ $# -gt 0 ]; do
    case $1 in
    --runs) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "$0: --runs: expected a positive integer" >&2; exit 2; }
        runs=$2; shift 2 ;;
    --against) [ $# -ge 2 ] && [ -x "$2" ] || { echo "$0: --against: expected an executable cadenza" >&2; exit 2; }
        other=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage ;;
    esac
done
cd "$root" || exit 1

# one run: "EVENTS EVENTS_PER_S WALL_S PEAK_MB" from cadenza's run statistics line
# ("run: N events in W s wall = R M events/s; ...; peak memory P MB")
one() { # cadenza, config
    "$1" sim "$2" --no-progress --summary /dev/null 2>&1 >/dev/null |
        awk '/^run:/ { for (i = 1; i <= NF; i++) { if ($i == "events" && $(i + 1) == "in") { ev = $(i - 1); w = $(i + 2) }
                                                 if ($i == "M" && $(i + 1) == "events/s;") r = $(i - 1)
                                                 if ($i == "memory") p = $(i + 1) }
                       ok = 1 }
             END { if (!ok) exit 1; print ev, r, w, p }'
}

# the median, then the highest and the lowest of the numbers on stdin, under the names
# given ("best" and "worst" where higher is better)
stats() { sort -g | awk -v hi="${1:-best}" -v lo="${2:-worst}" '{ a[NR] = $1 }
    END { printf "median %s, %s %s, %s %s", a[int((NR + 1) / 2)], hi, a[NR], lo, a[1] }'; }

st=0
for cfg in experiments/bench/sim_100k_1h.json experiments/bench/vidur_readme_10k.json; do
    rates=() walls=() peaks=() ratios=() orates=() events=
    for ((i = 1; i <= runs; i++)); do
        read -r ev r w p < <(one "$cz" "$cfg") || { echo "$cfg: run $i failed"; st=1; continue 2; }
        events=$ev rates+=("$r") walls+=("$w") peaks+=("$p")
        if [ -n "$other" ]; then
            read -r _ o _ _ < <(one "$other" "$cfg") || { echo "$cfg: run $i of $other failed"; st=1; continue 2; }
            orates+=("$o")
            ratios+=("$(awk -v a="$r" -v b="$o" 'BEGIN { printf "%.3f", a / b }')")
        fi
    done
    echo "$cfg: $events events, $runs runs"
    echo "  events/s (M): $(printf '%s\n' "${rates[@]}" | stats)"
    echo "  simulation wall time (s): $(printf '%s\n' "${walls[@]}" | stats highest lowest)"
    echo "  peak memory (MB): $(printf '%s\n' "${peaks[@]}" | stats highest lowest)"
    if [ -n "$other" ]; then
        echo "  $other, events/s (M): $(printf '%s\n' "${orates[@]}" | stats)"
        echo "  ratio of the pairs (this build / the other): $(printf '%s\n' "${ratios[@]}" | stats)"
    fi
done
exit $st

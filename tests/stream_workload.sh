#!/usr/bin/env bash
# tests/stream_workload.sh CADENZA SOURCE_ROOT - a synthetic workload produced as the run
# consumes it (the default of `cadenza sim`) gives the same summary and the same results
# file, byte for byte, as the whole workload built before the run (--whole-workload), over
# the steps a config applies session by session (arrival processes, closed loops, a
# concurrency bound, window, time scale, request cap, classes, audio, streams) and runs
# cut by the clock; and its memory does not grow with the trace (docs/workload.md).
# Prints "N passed, N failed".
set -u
cz=$(realpath "$1")
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
cd "$root" || exit 1

same() { # config, --set...: streamed and whole give identical outputs
    local cfg=$1
    shift
    "$cz" sim "$cfg" --quiet --summary "$tmp/a.json" -o "$tmp/a.h5" "$@" &&
        "$cz" sim "$cfg" --quiet --whole-workload --summary "$tmp/b.json" -o "$tmp/b.h5" "$@" &&
        cmp "$tmp/a.json" "$tmp/b.json" && cmp "$tmp/a.h5" "$tmp/b.h5"
}
base=experiments/bench/sim_100k_1h.json
n="--set workload.synthetic.requests=3000"
check "Poisson arrivals" same $base $n
check "window and time scale" same $base $n --set workload.window.start_s=10 \
    --set workload.window.duration_s=40 --set workload.time_scale=0.5
check "request cap" same $base $n --set workload.max_requests=700
check "closed loop with think times" same $base $n \
    --set 'workload.arrivals={"process":"closed_loop","concurrency":16,"think_s":2}'
check "closed loop cut by the clock" same $base $n \
    --set 'workload.arrivals={"process":"closed_loop","concurrency":16}' --set sim.max_time_s=30
check "max_concurrency" same $base $n --set workload.arrivals.max_concurrency=8
check "Gamma arrivals" same $base $n --set workload.arrivals.process=gamma \
    --set workload.arrivals.burstiness=0.3
check "best-effort fraction" same $base $n --set workload.best_effort_fraction=0.3
check "cut by the clock" same $base $n --set sim.max_time_s=40
check "a pool that refuses long prompts" same $base $n --set server.kv_blocks=200
check "spoken turns (audio)" same experiments/liveserve/sharegpt_audio.json
check "streams beside requests" same experiments/bros/mix.json
check "closed-loop sessions of several turns" same experiments/bench/sim_10k_sessions_1h.json \
    --set sim.max_time_s=600

# memory follows the sessions in flight: ten times the requests below capacity, nearly
# the same peak (the whole workload of 300 k requests alone is about 30 MB)
peak() { # requests -> peak memory in MB from the run line
    "$cz" sim $base --no-progress --summary /dev/null --set workload.synthetic.requests=$1 \
        --set workload.arrivals.rate_rps=20 "${@:2}" 2>&1 >/dev/null |
        sed -n 's/.*peak memory \([0-9.]*\) MB.*/\1/p'
}
check "300 k requests within 1.5 x the peak memory of 30 k" bash -c \
    "$(declare -f peak); cz='$cz' base='$base'; a=\$(peak 30000); b=\$(peak 300000);
     echo \"\$a MB, \$b MB\"; awk -v a=\"\$a\" -v b=\"\$b\" 'BEGIN { exit !(b < 1.5 * a) }'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

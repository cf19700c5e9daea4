#!/usr/bin/env bash
# tests/bench_memory.sh CADENZA SOURCE_ROOT - peak memory and events per second of the
# simulator as the trace grows: experiments/bench/sim_100k_1h.json's workload at 100 k,
# 1 M and 10 M requests (at its rate and below the card's capacity), and an hour of 10,000 concurrent sessions
# (experiments/bench/sim_10k_sessions_1h.json), and a trace file read a record at a time:
# Azure-format files of 100 k, 1 M and 10 M rows (one every 50 ms, written here) replayed
# at their own times, the 1 M one also read whole. Target: the peak at 10 M within 2x of
# the peak at 100 k, and the hour of sessions under 300 MB. Prints one line per run (cadenza's
# own run statistics); run by `meson test -C build --benchmark -v memory`.
set -u
cz=$(realpath "$1")
root=$(realpath "$2")
cd "$root" || exit 1

run() { # label, config, cadenza sim options...
    local label=$1 cfg=$2 line
    shift 2
    line=$("$cz" sim "$cfg" --no-progress --summary /dev/null "$@" 2>&1 >/dev/null | grep '^run:') ||
        { echo "$label: failed"; return 1; }
    echo "$label: $line"
}

st=0
# at the benchmark's 27.8 req/s the H100 card is over capacity (about 23.4 req/s served),
# so the waiting backlog, and with it the requests in flight, grows with the trace; at
# 20 req/s it does not, and what grows is what the simulator keeps per request
for rate in 27.7778 20; do
    for n in 100000 1000000 10000000; do
        run "sim_100k_1h at $rate req/s, $n requests" experiments/bench/sim_100k_1h.json \
            --set workload.synthetic.requests=$n --set workload.arrivals.rate_rps=$rate || st=1
    done
done
run "sim_10k_sessions_1h" experiments/bench/sim_10k_sessions_1h.json || st=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 100000 1000000 10000000; do
    awk -v n="$n" 'BEGIN { print "TIMESTAMP,ContextTokens,GeneratedTokens";
        for (i = 0; i < n; i++) { t = i * 0.05; d = int(t / 86400); r = t - d * 86400;
            h = int(r / 3600); m = int((r - h * 3600) / 60); s = r - h * 3600 - m * 60;
            printf "2023-11-%02d %02d:%02d:%010.7f,%d,%d\n", 1 + d, h, m, s,
                200 + (i * 37) % 900, 50 + (i * 13) % 300 } }' >"$tmp/azure.csv"
    trace='workload.trace={"path":"'"$tmp/azure.csv"'"}'
    run "Azure-format trace, $n rows" experiments/default.json --set "$trace" || st=1
    if [ "$n" = 1000000 ]; then
        run "Azure-format trace, $n rows, read whole" experiments/default.json --set "$trace" \
            --whole-workload || st=1
    fi
done
exit $st

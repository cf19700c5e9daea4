#!/usr/bin/env bash
# tests/stream_workload.sh CADENZA SOURCE_ROOT - a workload produced as the run consumes it
# (the default of `cadenza sim`: synthetic requests, and trace files read a record at a
# time) gives the same summary and the same results file, byte for byte, as the whole
# workload built before the run (--whole-workload), over the steps a config applies
# session by session (arrival processes, closed loops, a concurrency bound, window, time
# scale, request cap, classes, audio, streams), over every trace format read a record at
# a time and over traces that must be read whole after all (out of order, streams, open
# sessions of several turns), and for runs cut by the clock; a bad record is reported
# before the run; and memory does not grow with the trace (docs/workload.md).
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

# traces read a record at a time
azure=experiments/default.json
check "Azure trace at its own times" same $azure
check "Azure trace: window, time scale, request cap" same $azure \
    --set workload.window.start_s=100 --set workload.window.duration_s=600 \
    --set workload.time_scale=2 --set workload.max_requests=2000
check "Azure trace: Poisson arrivals, best-effort fraction" same $azure \
    --set 'workload.arrivals={"process":"poisson","rate_rps":4}' \
    --set workload.best_effort_fraction=0.4
check "Azure trace: max_concurrency, cut by the clock" same $azure \
    --set workload.arrivals.max_concurrency=32 --set sim.max_time_s=300
check "BurstGPT (no sessions), spoken" same experiments/liveserve/burstgpt_audio.json
mooncake() { # Mooncake's slice replayed on the default card, extra options
    same $azure --set 'workload.trace={"path":"'"$PWD"'/traces/data/mooncake_conversation/conversation_trace_head.jsonl"}' "$@"
}
check "Mooncake trace (prefix hashes)" mooncake
check "Mooncake trace, time scale" mooncake --set workload.time_scale=0.25
# a cadenza session file: closed sessions of several turns stream; open ones, streams and
# records out of order are read whole, with the same results
"$cz" trace convert traces/data/burstgpt3/BurstGPT_3_head.csv -o "$tmp/sessions.jsonl" \
    --format burstgpt >/dev/null 2>&1
cadenza_file() { # file, extra options
    local f=$1
    shift
    same $azure --set 'workload.trace={"path":"'"$f"'"}' "$@"
}
check "cadenza file, sessions closed" cadenza_file "$tmp/sessions.jsonl" \
    --set 'workload.arrivals={"process":"trace","turns":"closed"}' --set sim.max_time_s=900
check "cadenza file, open sessions of several turns (read whole)" cadenza_file \
    "$tmp/sessions.jsonl" --set sim.max_time_s=900
{ head -1 "$tmp/sessions.jsonl"
  echo '{"stream":{"start_s":0,"frame_period_s":0.08,"duration_s":5,"tokens_in_per_frame":4,"tokens_out_per_frame":2}}'
  tail -n +2 "$tmp/sessions.jsonl"; } >"$tmp/with_stream.jsonl"
check "cadenza file with a stream (read whole)" cadenza_file "$tmp/with_stream.jsonl" \
    --set 'workload.arrivals={"process":"trace","turns":"closed"}' --set sim.max_time_s=900
csv=traces/data/azure_llm_2023_conv/AzureLLMInferenceTrace_conv.csv
{ head -1 $csv; tail -n +2 $csv | head -400 | sort -r; } >"$tmp/unsorted.csv"
check "Azure rows out of order (read whole)" same $azure \
    --set 'workload.trace={"path":"'"$tmp/unsorted.csv"'"}'
{ head -300 $csv; echo "2023-11-16 18:20:00.0000000,12,x"; tail -n +301 $csv | head -100; } \
    >"$tmp/bad.csv"
bad_record() {
    local out
    out=$("$cz" sim $azure --quiet --summary "$tmp/bad.json" -o "$tmp/bad.h5" \
        --set 'workload.trace={"path":"'"$tmp/bad.csv"'"}' 2>&1)
    local rc=$?
    echo "$out"
    [ $rc -eq 2 ] && [[ "$out" == *"bad.csv:301: field 'GeneratedTokens'"* ]] &&
        [ ! -e "$tmp/bad.json" ] && [ ! -e "$tmp/bad.h5" ]
}
check "a bad record in a streamed trace: exit 2 naming the line, no outputs" bad_record

# memory follows the sessions in flight: ten times the requests below capacity, nearly
# the same peak (the whole workload of 300 k requests alone is about 30 MB); percentiles
# from the sketch, as past the exact budget (the default keeps up to 2M samples a metric)
peak() { # requests -> peak memory in MB from the run line
    "$cz" sim $base --no-progress --summary /dev/null --set workload.synthetic.requests=$1 \
        --set metrics.percentiles=sketch \
        --set workload.arrivals.rate_rps=20 "${@:2}" 2>&1 >/dev/null |
        sed -n 's/.*peak memory \([0-9.]*\) MB.*/\1/p'
}
check "300 k requests within 1.5 x the peak memory of 30 k" bash -c \
    "$(declare -f peak); cz='$cz' base='$base'; a=\$(peak 30000); b=\$(peak 300000);
     echo \"\$a MB, \$b MB\"; awk -v a=\"\$a\" -v b=\"\$b\" 'BEGIN { exit !(b < 1.5 * a) }'"

# a trace read a record at a time: an Azure-format file ten times longer, nearly the same
# peak (rows every 50 ms, below the card's capacity)
gen_azure() { # rows -> file
    awk -v n="$1" 'BEGIN { print "TIMESTAMP,ContextTokens,GeneratedTokens";
        for (i = 0; i < n; i++) { t = i * 0.05; h = int(t / 3600); m = int((t - h * 3600) / 60);
            s = t - h * 3600 - m * 60;
            printf "2023-11-16 %02d:%02d:%010.7f,%d,%d\n", h, m, s, 200 + (i * 37) % 900, 50 + (i * 13) % 300 } }' \
        >"$tmp/big_$1.csv"
}
trace_peak() { # rows -> peak memory in MB
    "$cz" sim $azure --no-progress --summary /dev/null --set metrics.percentiles=sketch \
        --set 'workload.trace={"path":"'"$tmp/big_$1.csv"'"}' 2>&1 >/dev/null |
        sed -n 's/.*peak memory \([0-9.]*\) MB.*/\1/p'
}
gen_azure 20000
gen_azure 200000
check "a trace of 200 k rows within 1.5 x the peak memory of 20 k" bash -c \
    "$(declare -f trace_peak); cz='$cz' azure='$azure' tmp='$tmp'; a=\$(trace_peak 20000);
     b=\$(trace_peak 200000); echo \"\$a MB, \$b MB\";
     awk -v a=\"\$a\" -v b=\"\$b\" 'BEGIN { exit !(b < 1.5 * a) }'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

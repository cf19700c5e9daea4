#!/usr/bin/env bash
# tests/robustness.sh CADENZA SOURCE_ROOT - what users' files and machines bring: traces
# and configs with a UTF-8 byte-order mark and CRLF line ends, traces whose timestamps lie
# years apart, efficiencies near zero and clocks past what a run represents, a full disk
# under the results file and under a sweep's output, an address-space limit, and the
# temporaries a killed run leaves. Each ends with a result or a clean error (exit 1 or 2
# with the file, field and reason), never a crash, a hang or a half-written file. The full
# disk is a small tmpfs when this user may mount one (root), else /dev/full; what needs
# the tmpfs, or an unsanitized build (ASan reserves address space beyond any ulimit -v),
# says SKIP. Prints "N passed, N failed".
set -u
cz=$(realpath "$1")
root=$2
tmp=$(mktemp -d)
small=""
cleanup() {
    [ -n "$small" ] && umount "$small" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$root" || exit 1
. "$(dirname "$0")/check.sh"
azure=traces/data/azure_llm_2023_conv/AzureLLMInferenceTrace_conv.csv
asan=false
nm "$cz" 2>/dev/null | grep -q __asan_init && asan=true

# the summary's numbers, config aside (it names the trace file)
same_numbers() { # a.json b.json
    python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for s in (a, b):
    s.pop("config", None)
sys.exit(0 if a == b else 1)
PY
}

# ---- byte-order marks and CRLF ----
head -n 201 "$azure" | tr -d '\r' >"$tmp/plain.csv"
{ printf '\xef\xbb\xbf'; sed 's/$/\r/' "$tmp/plain.csv"; } >"$tmp/bom.csv"
t_bom_csv() {
    "$cz" sim --set workload.trace.path="$tmp/plain.csv" --quiet --no-progress \
        --summary "$tmp/a.json" &&
        "$cz" sim --set workload.trace.path="$tmp/bom.csv" --quiet --no-progress \
            --summary "$tmp/b.json" && same_numbers "$tmp/a.json" "$tmp/b.json"
}
check "a CSV trace with a byte-order mark and CRLF reads as the plain one" t_bom_csv
t_bom_jsonl() {
    local mc=traces/data/mooncake_conversation/conversation_trace_head.jsonl
    head -n 50 "$mc" >"$tmp/plain.jsonl"
    { printf '\xef\xbb\xbf'; sed 's/$/\r/' "$tmp/plain.jsonl"; } >"$tmp/bom.jsonl"
    "$cz" trace info "$tmp/plain.jsonl" >"$tmp/a.txt" &&
        "$cz" trace info "$tmp/bom.jsonl" >"$tmp/b.txt" &&
        diff <(grep -v jsonl "$tmp/a.txt") <(grep -v jsonl "$tmp/b.txt")
}
check "... a JSONL trace too" t_bom_jsonl
t_bom_config() {
    { printf '\xef\xbb\xbf'; cat experiments/default.json; } >"$tmp/cfg.json"
    sed -i "s|\"\\.\\./traces/|\"$PWD/traces/|" "$tmp/cfg.json"
    "$cz" sim "$tmp/cfg.json" --set workload.max_requests=50 --quiet --no-progress
}
check "... and a config" t_bom_config

# ---- simulated time that is not work ----
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00.0000000,100,20\n2024-01-01 00:00:00.0000000,100,20\n' \
    >"$tmp/year.csv"
peak_mb() { sed -n 's/.*peak memory \([0-9.]*\) MB.*/\1/p' "$tmp/err" | tail -n 1; }
t_year_apart() {
    "$cz" sim --set workload.trace.path="$tmp/year.csv" --no-progress >/dev/null 2>"$tmp/err" &&
        python3 -c "import sys; sys.exit(0 if float('$(peak_mb)') < 100 else 1)"
}
check "two trace rows a year apart: memory follows the work (< 100 MB)" t_year_apart
t_time_scale() {
    "$cz" sim --set workload.max_requests=100 --set workload.time_scale=1e7 --no-progress \
        >/dev/null 2>"$tmp/err" &&
        python3 -c "import sys; sys.exit(0 if float('$(peak_mb)') < 100 else 1)"
}
check "time_scale 1e7: memory follows the work (< 100 MB)" t_time_scale
t_clock_limit() {
    expect_exit 2 "$cz" sim --set workload.trace.path="$tmp/year.csv" \
        --set workload.time_scale=1e9 --quiet --no-progress &&
        grep -q "the simulated clock would pass 1e+15 s" "$tmp/cmd.err"
}
check "a clock past 1e15 s is refused (exit 2)" t_clock_limit

# ---- efficiencies that make a step's time unrepresentable ----
t_eff() { # field value
    expect_exit 2 "$cz" sim --set workload.max_requests=100 --set "cost.$1=$2" --quiet \
        --no-progress && grep -q "cost.$1=$2: field '$1': expected a fraction in \[1e-06, 1\]" \
        "$tmp/cmd.err"
}
check "flops_eff 1e-10 is refused naming the field and the range" t_eff flops_eff 1e-10
check "... 1e-308" t_eff flops_eff 1e-308
check "... bw_eff 5e-324" t_eff bw_eff 5e-324
check "... while 1e-6 runs" "$cz" sim --set workload.max_requests=20 --set cost.flops_eff=1e-6 \
    --quiet --no-progress

# ---- an address-space limit: a message and exit 1, never a hang ----
if $asan; then
    echo "SKIP: address-space limits (AddressSanitizer reserves more than any limit)"
else
    t_ulimit_sim() {
        (ulimit -v 200000 && timeout 60 "$cz" sim --set workload.max_requests=10 --quiet \
            --no-progress)
    }
    check "a simulation under ulimit -v 200000 runs (it needs no BLAS)" t_ulimit_sim
    t_ulimit_replay() {
        (ulimit -v 300000 && timeout 120 "$cz" replay experiments/engine/cpu.json \
            --set workload.max_requests=2 --threads 1 --quiet --no-progress) 2>"$tmp/err"
        [ $? -eq 1 ] && grep -q "out of memory" "$tmp/err"
    }
    check "a replay under ulimit -v 300000 ends out of memory (exit 1), no hang" t_ulimit_replay
fi

# ---- a full disk ----
if [ "$(id -u)" -eq 0 ] && mkdir -p "$tmp/small" && mount -t tmpfs -o size=40k tmpfs "$tmp/small" 2>/dev/null; then
    small=$tmp/small
fi
t_full_results() {
    local d=$1 what=$2
    expect_exit 1 "$cz" sim --set workload.max_requests=300 -o "$d/x.h5" \
        --summary "$d/s.json" --quiet --no-progress &&
        grep -q "$what: HDF5 failed .*: No space left on device" "$tmp/cmd.err" &&
        [ -z "$(ls -A "$d")" ]
}
if [ -n "$small" ]; then
    check "a results file that does not fit: exit 1 naming it and the reason, nothing left" \
        t_full_results "$small" "$small/x.h5"
else
    echo "SKIP: a full tmpfs (this user cannot mount one); /dev/full instead"
fi
t_dev_full() {
    expect_exit 1 "$cz" sim --set workload.max_requests=300 -o /dev/full --quiet --no-progress &&
        grep -q "/dev/full" "$tmp/cmd.err"
}
check "results written to /dev/full: exit 1, no crash" t_dev_full
t_full_sweep() {
    local sw=experiments/liveserve/sweep_poisson.json
    [ -f "$sw" ] || sw=$(ls experiments/*/sweep_poisson.json | head -n 1)
    "$cz" sweep "$sw" --quiet -o "$tmp/whole.jsonl" || return 1
    local size
    size=$(stat -c %s "$tmp/whole.jsonl")
    umount "$small" && mount -t tmpfs -o size=$((size * 3 / 2)) tmpfs "$small" || return 1
    expect_exit 1 "$cz" sweep "$sw" --quiet -o "$small/r.jsonl" &&
        grep -q "kept in $small/r.jsonl.partial" "$tmp/cmd.err" &&
        cp "$small/r.jsonl.partial" "$tmp/r.jsonl.partial" &&
        "$cz" sweep "$sw" --quiet -o "$tmp/r.jsonl" --resume && cmp "$tmp/r.jsonl" "$tmp/whole.jsonl"
}
if [ -n "$small" ]; then
    check "a sweep whose output does not fit keeps every row for --resume" t_full_sweep
else
    echo "SKIP: a sweep on a full tmpfs"
fi

# ---- temporaries a killed run left ----
t_stale() {
    local sw
    sw=$(ls experiments/*/sweep_poisson.json | head -n 1)
    # pid 4194304 is above the kernel's pid_max: no process has it
    : >"$tmp/st.jsonl.tmp4194304" && : >"$tmp/st.jsonl.partial.tmp4194304" &&
        : >"$tmp/st.jsonl.tmp$$" &&
        "$cz" sweep "$sw" --quiet -o "$tmp/st.jsonl" --resume &&
        [ ! -e "$tmp/st.jsonl.tmp4194304" ] && [ ! -e "$tmp/st.jsonl.partial.tmp4194304" ] &&
        [ -e "$tmp/st.jsonl.tmp$$" ]
}
check "a run removes the temporaries of killed runs, not those of live ones" t_stale

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# tests/prefix_cache.sh CADENZA H5TABLE SOURCE_ROOT - automatic prefix caching end to end
# (server.prefix_caching; docs/serving-core.md): the Mooncake conversation slice, whose
# requests share prompt prefixes through their hash_ids, served with the cache on finds
# hits and answers sooner than with it off; its summary keys and the results file's
# cached_tokens agree; the run is the same streamed and whole; the engine and a windowed
# KV refuse the field with exit 2. Prints the numbers measured, then "N passed, N failed".
set -u
cz=$(realpath "$1")
h5table=$(realpath "$2")
root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
. "$(dirname "$0")/check.sh"

mooncake=traces/data/mooncake_conversation/conversation_trace_head.jsonl
# the default deployment (Llama-3-8B on one H100) at a quarter of the trace's rate, every
# prompt admitted (max_model_len 0: the pool bounds the context)
run() { # on|off, extra arguments
    local pc=false
    [ "$1" = on ] && pc=true
    shift
    "$cz" sim --trace "$mooncake" --quiet --no-progress --set server.max_model_len=0 \
        --set workload.time_scale=4 --set server.prefix_caching=$pc "$@"
}
check "the Mooncake slice with the cache off" run off --summary "$tmp/off.json"
check "the Mooncake slice with the cache on" run on --summary "$tmp/on.json" -o "$tmp/on.h5"
check "the cache on: hits, and a lower mean TTFT than off" python3 - "$tmp/off.json" "$tmp/on.json" <<'PY'
import json, sys
off, on = (json.load(open(f)) for f in sys.argv[1:])
st = on["stages"][0]
print("prefix cache off: mean TTFT %.1f ms, median %.1f ms, %d preemptions" %
      (off["mean_ttft_ms"], off["median_ttft_ms"], off["preemptions"]), file=sys.stderr)
print("prefix cache on:  mean TTFT %.1f ms, median %.1f ms, %d preemptions; hit rate %.4f "
      "(%d of %d prompt tokens), prefill tokens saved %d" %
      (on["mean_ttft_ms"], on["median_ttft_ms"], on["preemptions"],
       st["prefix_cache_hit_rate"], st["prefix_cache_hits"], st["prefix_cache_queries"],
       st["prefill_tokens_saved"]), file=sys.stderr)
assert "prefix_cache_hit_rate" not in off["stages"][0], off["stages"][0]
assert off["completed"] == on["completed"] == 2000, (off["completed"], on["completed"])
# every prompt is looked up once before any preemption: the queries are the prompt tokens
assert st["prefix_cache_queries"] == on["total_input_tokens"], st
assert st["prefix_cache_hit_rate"] > 0 and st["prefill_tokens_saved"] >= st["prefix_cache_hits"]
assert on["mean_ttft_ms"] < off["mean_ttft_ms"], (on["mean_ttft_ms"], off["mean_ttft_ms"])
PY
cat "$tmp/err"
check "/requests' cached_tokens add up to the stage's hits" bash -c \
    "'$h5table' '$tmp/on.h5' requests >'$tmp/req.txt' &&
     python3 - '$tmp/req.txt' '$tmp/on.json' <<'PY'
import json, sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
col = rows[0].index('cached_tokens')
total = sum(int(float(r[col])) for r in rows[1:])
hits = json.load(open(sys.argv[2]))['stages'][0]['prefix_cache_hits']
assert total == hits and total > 0, (total, hits)
PY"
check "streamed and whole runs agree with the cache on" bash -c \
    "$(declare -f run); cz='$cz'; mooncake='$mooncake';
     run on --set workload.max_requests=600 --summary '$tmp/a.json' &&
     run on --set workload.max_requests=600 --whole-workload --summary '$tmp/b.json' &&
     cmp '$tmp/a.json' '$tmp/b.json'"
check "the engine refuses server.prefix_caching (exit 2, naming it)" bash -c \
    "'$cz' replay experiments/engine/cpu.json --quiet --set server.prefix_caching=true \
         --set workload.max_requests=1 2>'$tmp/eng.err'; [ \$? -eq 2 ] &&
     grep -q 'server.prefix_caching' '$tmp/eng.err' && grep -q 'share' '$tmp/eng.err'"
check "a windowed KV refuses prefix_caching (exit 2, naming it)" bash -c \
    "'$cz' sim --quiet --set server.prefix_caching=true --set server.kv_window_tokens=64 \
         --set scheduler=fcfs_scan 2>'$tmp/win.err'; [ \$? -eq 2 ] &&
     grep -q \"'prefix_caching'\" '$tmp/win.err'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

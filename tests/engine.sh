#!/usr/bin/env bash
# tests/engine.sh CADENZA SOURCE_ROOT - `cadenza replay` on the CPU engine: a trace replay
# whose every request is accounted for with the simulator's counts, the /steps table, the
# omni pipeline with barge-in and the host tier, windowed streams, disaggregated prefill and
# decode, Ctrl-C as a partial run, and the configs the engine refuses (exit 2, naming why).
# Prints "N passed, N failed".
set -u
cz=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
num() { # file key: the first number of "key" in a JSON summary
    grep -o "\"$2\":[[:space:]]*[-0-9.e+]*" "$1" | head -1 | sed 's/.*:[[:space:]]*//'
}

cpu="$root/experiments/engine/cpu.json"
check "replay --help" "$cz" replay --help
check "replay needs a config" expect_exit 2 "$cz" replay
check "an unknown backend is a usage error" expect_exit 2 "$cz" replay "$cpu" --backend tpu
# --backend cuda: without a device (or without the CUDA build) a device error naming the
# reason, exit 1; with one, a run whose summary names the backend
cuda_replay() {
    "$cz" replay "$cpu" --backend cuda --set workload.max_requests=4 --summary "$tmp/cu.json" \
        --no-progress >"$tmp/cmd.out" 2>"$tmp/cmd.err"
    case $? in
    0) grep -q '"kernel_backend":[[:space:]]*"cuda"' "$tmp/cu.json" ;;
    1) grep -q "backend 'cuda'" "$tmp/cmd.err" && [ ! -e "$tmp/cu.json" ] ;;
    *) false ;;
    esac
}
check "--backend cuda runs on a device or says why not" cuda_replay
cuda_generate() {
    "$cz" generate --model tiny-llama --tokens 1,2,3 --max-tokens 4 --dtype f32 --backend cuda --json \
        >"$tmp/cmd.out" 2>"$tmp/cmd.err"
    case $? in
    0) [ "$(cat "$tmp/cmd.out")" = "$("$cz" generate --model tiny-llama --tokens 1,2,3 \
            --max-tokens 4 --dtype f32 --json)" ] ;;
    1) grep -q "backend 'cuda'" "$tmp/cmd.err" ;;
    *) false ;;
    esac
}
check "generate --backend cuda matches the CPU on a device or says why not" cuda_generate
check "a bad thread count is a usage error" expect_exit 2 "$cz" replay "$cpu" --threads 0

# a trace replay: every request accounted for, as many as the simulator serves
check "replay of 8 trace requests" "$cz" replay "$cpu" --set workload.max_requests=8 \
    -o "$tmp/r.h5" --summary "$tmp/r.json" --no-progress
check "the summary says the engine ran it, whole" bash -c \
    "grep -q '\"driver\":[[:space:]]*\"engine\"' '$tmp/r.json' &&
     grep -q '\"partial\":[[:space:]]*false' '$tmp/r.json'"
check "every request completed" bash -c "[ \"\$(grep -o '\"completed\":[[:space:]]*[0-9]*' '$tmp/r.json' | head -1 | grep -o '[0-9]*$')\" = 8 ]"
"$cz" sim "$cpu" --set workload.max_requests=8 --summary "$tmp/s.json" --quiet
check "the simulator serves the same requests" bash -c \
    "[ -n '$(num "$tmp/s.json" completed)' ] && [ '$(num "$tmp/r.json" completed)' = '$(num "$tmp/s.json" completed)' ] &&
     [ '$(num "$tmp/r.json" generated_tokens)' = '$(num "$tmp/s.json" generated_tokens)' ]"
check "the engine's step line" bash -c \
    "'$cz' replay '$cpu' --set workload.max_requests=2 --no-progress 2>&1 >/dev/null |
     grep -Eq '^engine: [1-9][0-9]* steps'"

# Ctrl-C: the run stops, writes what it has, marked partial, every turn accounted for
timeout -s INT 4 "$cz" replay "$cpu" --summary "$tmp/p.json" --no-progress >"$tmp/p.out" 2>&1
check "Ctrl-C writes a partial summary" grep -q '"partial":[[:space:]]*true' "$tmp/p.json"
check "a partial run accounts for every request" bash -c \
    "grep -q 'requests 40: completed' '$tmp/p.out' && grep -q 'unfinished' '$tmp/p.out'"

# the omni pipeline: encoder, thinker, talker with its code predictor, vocoder; barge-in
# and the host tier's copies
check "omni pipeline with barge-in and offload" "$cz" replay \
    "$root/experiments/engine/omni_barge_in.json" --set workload.synthetic.requests=4 \
    --set workload.arrivals.concurrency=2 --set workload.synthetic.output_tokens=8 \
    --set workload.barge_in.p=0.5 --summary "$tmp/o.json" --no-progress
check "its spoken turns are all accounted for" grep -q '"spoken_turns":[[:space:]]*4' "$tmp/o.json"

# windowed KV with sinks (Metronome) on periodic streams
cat >"$tmp/win.json" <<'JSON'
{"model": "tiny-llama", "hardware": "cpu-host",
 "server": {"kv_blocks": 512, "kv_sink_tokens": 16, "kv_window_tokens": 128,
            "max_num_batched_tokens": 512, "max_num_seqs": 16},
 "workload": {"streams": {"count": 4, "frame_period_s": 0.5, "tokens_in_per_frame": 25,
                          "tokens_out_per_frame": 30, "duration_s": 4, "stagger": "random"}}}
JSON
check "windowed streams run" "$cz" replay "$tmp/win.json" --summary "$tmp/w.json" --no-progress
check "every frame is accounted for" bash -c \
    "[ \"\$(grep -o '\"frames\":[[:space:]]*[0-9]*' '$tmp/w.json' | head -1 | grep -o '[0-9]*$')\" = 32 ]"

# disaggregated prefill and decode (docs/engine.md): pools of different block sizes, every
# request completed, each turn's KV pulled; the CUDA backend refuses it naming the field
cat >"$tmp/pd.json" <<'JSON'
{"model": "tiny-llama", "hardware": "cpu-host",
 "server": {"kv_blocks": 256, "max_num_seqs": 8, "max_num_batched_tokens": 256},
 "disaggregation": {"prefill": {"replicas": 1, "block_tokens": 16},
                    "decode": {"replicas": 1, "block_tokens": 32, "kv_blocks": 128}},
 "workload": {"synthetic": {"requests": 8, "input_tokens": {"dist": "fixed", "value": 100},
                            "output_tokens": {"dist": "fixed", "value": 8}},
              "arrivals": {"process": "poisson", "rate_rps": 20}}}
JSON
check "disaggregated replay" "$cz" replay "$tmp/pd.json" --summary "$tmp/pd.out.json" --no-progress
check "every request completed, its KV pulled" bash -c \
    "[ '$(num "$tmp/pd.out.json" completed)' = 8 ] && [ '$(num "$tmp/pd.out.json" kv_transfers)' = 8 ]"
check "the CUDA backend refuses disaggregation" expect_exit 2 "$cz" replay "$tmp/pd.json" \
    --backend cuda --no-progress
check "the message names the field" grep -q "'disaggregation'" "$tmp/cmd.err"

# Nova's cross-stage runtime on CPU thread partitions (experiments/engine/nova_cpu.json):
# every request through vision, prefill and decode, accounted for as the simulator counts
# them, under Nova, its Multi-Stream baseline, PF-Limit and chunked prefill
nova="$root/experiments/engine/nova_cpu.json"
nb='"sm_decode_vision":1,"sm_decode_prefill":1,"sm_floor":1,"sm_granularity":1'
"$cz" sim "$nova" --set workload.synthetic.requests=24 --summary "$tmp/ns.json" --no-progress \
    >/dev/null 2>&1
for sch in "{\"name\":\"nova\",$nb}" "{\"name\":\"nova\",$nb,\"multi_stream\":true}" \
           '{"name":"nova_pf_limit"}' '{"name":"nova_chunked_prefill","token_budget":64}'; do
    name=$(echo "$sch" | sed 's/.*"name":"\([a-z_]*\)".*/\1/')$(echo "$sch" | grep -q multi && echo " multi-stream")
    rm -f "$tmp/nr.json"
    check "cross-stage replay: $name" "$cz" replay "$nova" --set workload.synthetic.requests=24 \
        --set "scheduler=$sch" --summary "$tmp/nr.json" -o "$tmp/nr.h5" --no-progress
    check "cross-stage replay: $name: all 24 completed" bash -c \
        "[ \"\$(grep -o '\"completed\":[[:space:]]*[0-9]*' '$tmp/nr.json' | head -1 | grep -o '[0-9]*\$')\" = 24 ]"
done
check "the simulator completes the same requests" bash -c \
    "[ \"\$(grep -o '\"completed\":[[:space:]]*[0-9]*' '$tmp/ns.json' | head -1 | grep -o '[0-9]*\$')\" = 24 ]"

# configs the engine refuses
check "a pool sized for a GPU is refused" expect_exit 2 "$cz" replay "$cpu" \
    --set hardware=h100-sxm --set server.kv_blocks=0
check "the message names engine.max_kv_bytes" grep -q max_kv_bytes "$tmp/cmd.err"
check "Nova's vision weight offload is refused" expect_exit 2 "$cz" replay "$nova" \
    --set "scheduler={\"name\":\"nova\",$nb,\"vision_resident_layers\":1}"
check "the message says why" grep -q "keeps every vision encoder weight resident" "$tmp/cmd.err"
check "a missing checkpoint names the folder" expect_exit 2 "$cz" replay "$cpu" \
    --set engine.weights=/nonexistent-ckpt
check "the message names it" grep -q nonexistent-ckpt "$tmp/cmd.err"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# tests/cli.sh CADENZA SOURCE_ROOT - the command line as a user meets it: help, version,
# exit codes, error messages that name the file and field, no partial output on error,
# byte-identical summaries for the same seed, and a sweep. Prints "N passed, N failed".
set -u
cz=$(realpath "$1") # some checks run from other folders
root=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

check "--help exits 0" "$cz" --help
check "--version prints the version" bash -c "'$cz' --version | grep -q '^cadenza '"
check "sim --help" "$cz" sim --help
check "sweep --help" "$cz" sweep --help
check "trace --help" "$cz" trace --help
check "no command is a usage error" expect_exit 2 "$cz"
check "unknown option is a usage error" expect_exit 2 "$cz" sim --bogus
check "unknown command is a usage error" expect_exit 2 "$cz" frobnicate

cat >"$tmp/bad.json" <<'JSON'
{"workload": {"synthetic": {"requests": 10, "input_tokens": 5, "output_tokens": 5},
              "arrivals": {"process": "poisson", "rate_rps": 1}},
 "server": {"max_num_seqs": 0}}
JSON
check "a bad config exits 2" expect_exit 2 "$cz" sim "$tmp/bad.json" -o "$tmp/r.h5" --summary "$tmp/s.json"
check "the message names the file and the field" \
    bash -c "grep -q 'bad.json' '$tmp/cmd.err' && grep -q 'max_num_seqs' '$tmp/cmd.err'"
check "no partial output after an error" bash -c "[ ! -e '$tmp/r.h5' ] && [ ! -e '$tmp/s.json' ]"
check "a bad trace names file, line and field" bash -c \
    "'$cz' trace info '$root/tests/data/traces/burstgpt_bad_number.csv' 2>&1 >/dev/null | grep -q 'burstgpt_bad_number.csv:3: field .Request tokens.'"

cfg="$root/experiments/default.json"
check "same config and seed: byte-identical summary" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=300 --summary '$tmp/a.json' &&
     '$cz' sim '$cfg' --quiet --set workload.max_requests=300 --summary '$tmp/b.json' &&
     cmp '$tmp/a.json' '$tmp/b.json'"
check "results file written" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=100 -o '$tmp/r.h5' && [ -s '$tmp/r.h5' ]"
check "trace info --json has the documented keys" bash -c \
    "'$cz' trace info '$root/traces/data/burstgpt3/BurstGPT_3_head.csv' --json > '$tmp/i.json' &&
     for k in requests sessions turns_max dropped_failed duration_s mean_rate_rps input_tokens_p50 output_tokens_p50; do grep -q \"\\\"\$k\\\"\" '$tmp/i.json' || exit 1; done"

vlm="$root/experiments/nova/vlm.json"
check "a cross-stage run is deterministic and reports Nova's figures" bash -c \
    "'$cz' sim '$vlm' --quiet --set workload.synthetic.requests=60 --summary '$tmp/n1.json' &&
     '$cz' sim '$vlm' --quiet --set workload.synthetic.requests=60 --summary '$tmp/n2.json' &&
     cmp '$tmp/n1.json' '$tmp/n2.json' && grep -q '\"mean_vision_queue_ms\"' '$tmp/n1.json' &&
     grep -q '\"max_e2el_ms\"' '$tmp/n1.json'"
check "Nova's Table V setting prints the wait for the vision worker beside Eq. 6" bash -c \
    "'$cz' sim '$root/experiments/validation/nova_tableV.json' --no-progress \
        --set workload.synthetic.requests=60 2>/dev/null | grep -q 'vision worker: wait .* M/D/1 '"
check "a bad cross-stage parameter exits 2 naming the field" bash -c \
    "'$cz' sim '$vlm' --quiet --set 'scheduler={\"name\": \"nova_pf_limit\", \"decode_threshold\": -1}' \
        2>&1 >/dev/null | grep -q 'decode_threshold'; [ \${PIPESTATUS[0]} -eq 2 ]"

cat >"$tmp/sweep.json" <<JSON
{"name": "t", "base": "$cfg", "grid": {"server.max_num_seqs": [8, 64]},
 "report": ["completed", "p90_ttft_ms"]}
JSON
check "sweep runs every point" bash -c \
    "'$cz' sweep '$tmp/sweep.json' --set workload.max_requests=200 -o '$tmp/sw.jsonl' >/dev/null &&
     [ \$(wc -l < '$tmp/sw.jsonl') -eq 2 ]"
check "sweep --no-progress: the table on stdout, no progress line on stderr" bash -c \
    "'$cz' sweep '$tmp/sweep.json' --set workload.max_requests=50 --no-progress >'$tmp/np.out' 2>'$tmp/np.err' &&
     [ \$(grep -c '^ *[0-9]' '$tmp/np.out') -eq 2 ] && ! grep -q 'point' '$tmp/np.err'"

# NUL bytes: a trace or config with a NUL byte is an input error naming file, line, column
# (the line scanner used to stop at the NUL: 50 requests read, exit 0).
azure="$root/traces/data/azure_llm_2023_conv/AzureLLMInferenceTrace_conv.csv"
python3 - "$azure" "$tmp/azure_nul.csv" <<'PY'
import sys
lines = open(sys.argv[1], 'rb').read().split(b'\n')
lines[50] += b'\0'  # the end of line 51
open(sys.argv[2], 'wb').write(b'\n'.join(lines))
PY
check "trace info: a NUL byte exits 2 naming file, line and what it found" bash -c \
    "'$cz' trace info '$tmp/azure_nul.csv' 2>'$tmp/nul.err' >/dev/null; [ \$? -eq 2 ] &&
     grep -q 'azure_nul.csv:51:[0-9]*: found a NUL byte, expected text' '$tmp/nul.err'"
cat >"$tmp/nul_trace.json" <<'JSON'
{"workload": {"trace": {"path": "azure_nul.csv"}, "arrivals": {"process": "trace"}}}
JSON
check "sim: a config whose trace has a NUL byte exits 2 naming it" bash -c \
    "'$cz' sim '$tmp/nul_trace.json' --quiet 2>'$tmp/nul.err'; [ \$? -eq 2 ] &&
     grep -q 'azure_nul.csv:51:[0-9]*: found a NUL byte, expected text' '$tmp/nul.err'"
printf '{"workload": {"synthetic": {"requests": 5}}}\n\0' >"$tmp/nul_config.json"
check "sim: a NUL byte in the config itself exits 2 naming it" bash -c \
    "'$cz' sim '$tmp/nul_config.json' --quiet 2>'$tmp/nul.err'; [ \$? -eq 2 ] &&
     grep -q 'nul_config.json:2:1: found a NUL byte, expected text' '$tmp/nul.err'"

# --set: the whole value is JSON or it is a string; empty keys are errors; a bad value names
# the --set argument it came from, not the config file.
check "--set: a JSON prefix is not a number, and the error names the --set" bash -c \
    "'$cz' sim '$cfg' --quiet --set server.max_num_seqs=64junk 2>'$tmp/set.err'; [ \$? -eq 2 ] &&
     grep -q \"^cadenza: --set server.max_num_seqs=64junk: field 'max_num_seqs': expected an integer\" '$tmp/set.err'"
check "--set: a top-level field and an unknown key name the --set" bash -c \
    "'$cz' sim '$cfg' --quiet --set seed=x 2>'$tmp/set.err'; [ \$? -eq 2 ] &&
     grep -q \"^cadenza: --set seed=x: field 'seed'\" '$tmp/set.err' &&
     { '$cz' sim '$cfg' --quiet --set server.max_num_seq=4 2>'$tmp/set.err'; [ \$? -eq 2 ]; } &&
     grep -q \"^cadenza: --set server.max_num_seq=4: unknown field 'max_num_seq'\" '$tmp/set.err'"
check "--set: a value set as an object names the --set for a field inside it" bash -c \
    "'$cz' sim '$vlm' --quiet --set 'scheduler={\"name\": \"nova_pf_limit\", \"decode_threshold\": -1}' 2>'$tmp/set.err';
     [ \$? -eq 2 ] && grep -q \"^cadenza: --set scheduler={.*}: field 'decode_threshold'\" '$tmp/set.err'"
check "--set: an error in the config file itself still names the file" bash -c \
    "'$cz' sim '$tmp/bad.json' --quiet --set seed=3 2>'$tmp/set.err'; [ \$? -eq 2 ] &&
     grep -q 'bad.json: server: field .max_num_seqs.' '$tmp/set.err'"
check "--set: a string that starts like a number stays a string" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=50 --set name=2024-run --summary '$tmp/n.json' &&
     grep -q '\"name\":[[:space:]]*\"2024-run\"' '$tmp/n.json'"
for bad in '...=5' 'server..max_num_seqs=5' '.seed=5' 'seed.=5'; do
    check "--set '$bad' is an error naming it" bash -c \
        "'$cz' sim '$cfg' --quiet --set '$bad' 2>'$tmp/set.err'; [ \$? -eq 2 ] &&
         grep -qF -- 'cadenza: --set $bad: empty key' '$tmp/set.err'"
done
check "sweep --set: a bad value names the --set, a bad grid value the sweep" bash -c \
    "'$cz' sweep '$tmp/sweep.json' --quiet --set workload.max_requests=50 --set server.max_num_batched_tokens=x 2>'$tmp/set.err';
     [ \$? -eq 2 ] && grep -q \"^cadenza: --set server.max_num_batched_tokens=x: field\" '$tmp/set.err' &&
     { '$cz' sweep '$tmp/sweep.json' --quiet --set server.max_num_seqs=x 2>'$tmp/set.err'; [ \$? -eq 0 ]; }"

# Peak memory is this process's (VmHWM), not a larger parent's that ru_maxrss keeps
# across exec: started from a process holding 700 MB, a small run reports far less.
check "peak memory is the process's own, not its parent's" bash -c \
    "python3 -c 'import os, sys; b = b\"\\x01\" * (700 << 20); os.execv(sys.argv[1], sys.argv[1:])' \
        '$cz' sim '$cfg' --no-progress --set workload.max_requests=100 2>'$tmp/peak.err' >/dev/null &&
     mb=\$(sed -n 's/.*peak memory \\([0-9.]*\\) MB.*/\\1/p' '$tmp/peak.err') && [ -n \"\$mb\" ] &&
     awk -v mb=\"\$mb\" 'BEGIN { exit !(mb > 0 && mb < 400) }'"

# Out of memory: a clear message and exit status 1, no assertion, no core dump, and the
# temporary outputs removed. Under AddressSanitizer (which needs the address space that
# ulimit -v takes away) its allocator returns NULL past 64 MB instead.
big="$root/experiments/bench/sim_100k_1h.json"
if nm "$cz" 2>/dev/null | grep -q __asan_init; then
    oom_env="ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=64"
    oom_limit=unlimited
else
    oom_env="CZ_OOM_TEST=1"
    oom_limit=400000
fi
mkdir "$tmp/oom"
check "out of memory exits 1 with a message and leaves no temporary" bash -c \
    "ulimit -c 0; ulimit -v $oom_limit; env $oom_env '$cz' sim '$big' --quiet \
        --set workload.synthetic.requests=100000000 -o '$tmp/oom/r.h5' --summary '$tmp/oom/s.json' \
        2>'$tmp/oom.err'; [ \$? -eq 1 ] &&
     grep -q '^cadenza: out of memory: cannot allocate [0-9]* bytes' '$tmp/oom.err' &&
     ! grep -qi 'assert' '$tmp/oom.err' && [ -z \"\$(ls -A '$tmp/oom')\" ]"

# Interrupted writes: SIGINT or SIGTERM at any point of `sim -o --summary` leaves no
# temporary file, and the results and the summary exist both or neither; a SIGINT during
# the run lands the partial run.
sig_run() { # signal, when (seconds, or a file whose growth triggers the signal)
    local sig=$1 when=$2 dir="$tmp/sig" pid status
    rm -rf "$dir" && mkdir "$dir"
    set -m # a background job of a script otherwise starts with SIGINT ignored
    "$cz" sim "$big" --quiet -o "$dir/r.h5" --summary "$dir/s.json" \
        --set workload.synthetic.requests=500000 --set sim.timeline_interval_s=0.01 &
    pid=$!
    set +m
    case $when in
    [0-9]*) sleep "$when" ;;
    *) # wait until the file is there and not empty (or the run is over)
        local f=${when//PID/$pid}
        until [ -s "$dir/$f" ] || ! kill -0 "$pid" 2>/dev/null; do :; done ;;
    esac
    kill -s "$sig" "$pid" 2>/dev/null
    wait "$pid"
    status=$?
    echo "status $status; left: $(ls -A "$dir" | tr '\n' ' ')"
    ! ls -A "$dir" | grep -q 'tmp' || return 1
    if [ -e "$dir/r.h5" ] || [ -e "$dir/s.json" ]; then
        [ -s "$dir/r.h5" ] && [ -s "$dir/s.json" ] || return 1
    fi
    case $sig:$when in
    # the first SIGINT ends the run where it is and lands what it has, marked partial
    INT:[0-9]*) [ "$status" -eq 0 ] && grep -q '"partial":[[:space:]]*true' "$dir/s.json" ;;
    INT:r.h5.tmp*) [ "$status" -eq 0 ] && [ -s "$dir/r.h5" ] ;;
    # SIGTERM before the commit ends the run with nothing written
    TERM:[0-9]* | TERM:r.h5.tmp*) [ "$status" -ge 128 ] && [ ! -e "$dir/r.h5" ] ;;
    esac
}
check "SIGINT during the run" sig_run INT 0.3
check "SIGTERM during the run" sig_run TERM 0.6
check "SIGTERM while the results file is written" sig_run TERM r.h5.tmpPID
check "SIGINT while the results file is written" sig_run INT r.h5.tmpPID
check "SIGINT once the summary is written: both land or neither" sig_run INT s.json.tmpPID
check "SIGTERM as the results land: the summary lands with them" sig_run TERM r.h5
check "an uninterrupted run writes both" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=50 -o '$tmp/sig/r.h5' --summary '$tmp/sig/s.json' &&
     [ -s '$tmp/sig/r.h5' ] && [ -s '$tmp/sig/s.json' ] && [ -z \"\$(ls -A '$tmp/sig' | grep tmp)\" ]"
check "an unwritable output fails before the run, exit 1, naming it" bash -c \
    "'$cz' sim '$cfg' --quiet -o '$tmp/no-such-dir/r.h5' 2>'$tmp/w.err'; [ \$? -eq 1 ] &&
     grep -q \"^cadenza: -o: cannot write '$tmp/no-such-dir/r.h5' (No such file or directory)\" '$tmp/w.err'"
check "trace convert and sweep -o leave no temporary" bash -c \
    "'$cz' trace convert '$root/traces/data/burstgpt3/BurstGPT_3_head.csv' -o '$tmp/sig/c.jsonl' >/dev/null &&
     '$cz' sweep '$tmp/sweep.json' --quiet --set workload.max_requests=20 -o '$tmp/sig/w.jsonl' &&
     [ -s '$tmp/sig/c.jsonl' ] && [ -s '$tmp/sig/w.jsonl' ] && [ -z \"\$(ls -A '$tmp/sig' | grep tmp)\" ]"

check "an output that is a pipe is written in place, not renamed over" bash -c \
    "mkfifo '$tmp/sig/fifo' && { timeout 20 cat '$tmp/sig/fifo' >'$tmp/sig/from_fifo' & } &&
     timeout 20 '$cz' trace convert '$root/traces/data/burstgpt3/BurstGPT_3_head.csv' -o '$tmp/sig/fifo' >/dev/null;
     rc=\$?; wait; [ \$rc -eq 0 ] && [ -p '$tmp/sig/fifo' ] && grep -q cadenza-sessions '$tmp/sig/from_fifo' &&
     [ -z \"\$(ls -A '$tmp/sig' | grep tmp)\" ]"

# generate: a card's random weights, on the CPU
check "generate --help" "$cz" generate --help
check "generate: greedy ids on one line, deterministic for a seed" bash -c \
    "'$cz' generate --model tiny-llama --tokens 1,2,3 --max-tokens 5 --seed 7 --threads 1 >'$tmp/g1' &&
     '$cz' generate --model tiny-llama --tokens 1,2,3 --max-tokens 5 --seed 7 --threads 2 >'$tmp/g2' &&
     cmp '$tmp/g1' '$tmp/g2' && grep -Eq '^[0-9]+( [0-9]+){4}\$' '$tmp/g1'"
check "generate --json and raw --logits (N x vocab float32)" bash -c \
    "'$cz' generate --model tiny-llama --tokens 5 --max-tokens 3 --json --logits '$tmp/l.bin' >'$tmp/g.json' &&
     grep -Eq '^\{\"tokens\": \[[0-9]+, [0-9]+, [0-9]+\]\}\$' '$tmp/g.json' &&
     [ \$(stat -c %s '$tmp/l.bin') -eq \$((3 * 4096 * 4)) ]"
check "generate: a token beyond the vocabulary exits 2 naming it" bash -c \
    "'$cz' generate --model tiny-llama --tokens 1,4096 --max-tokens 2 --logits '$tmp/v.npy' 2>'$tmp/v.err';
     [ \$? -eq 2 ] && grep -q 'token 1 is 4096' '$tmp/v.err' && [ ! -e '$tmp/v.npy' ]"
check "generate: bad flags exit 2" bash -c \
    "for a in '--tokens 1' '--model tiny-llama --tokens 1,,2 --max-tokens 1' \
              '--model tiny-llama --tokens 1 --max-tokens 0' '--model tiny-llama --tokens 1 --max-tokens 1 --dtype f8' \
              '--model tiny-llama --tokens 1 --max-tokens 1 --threads 0' '--model tiny-llama --tokens 1 --max-tokens 1 --bogus'; do
         '$cz' generate \$a >/dev/null 2>&1; [ \$? -eq 2 ] || exit 1; done"
check "generate: an unknown card exits 2" expect_exit 2 "$cz" generate --model no-such-card --tokens 1 --max-tokens 1
check "generate: a folder without config.json exits 2" expect_exit 2 "$cz" generate --model "$tmp" --tokens 1 --max-tokens 1
# silent choices refused: a key twice, a TP degree that splits no heads, a pool no turn fits
printf '{"seed": 1,\n "seed": 2}\n' > "$tmp/dup.json"
check "a key named twice exits 2" expect_exit 2 "$cz" sim "$tmp/dup.json"
check "... naming the file and the key" grep -q "dup.json: key 'seed' appears twice" "$tmp/cmd.err"
check "a tensor-parallel degree that does not divide the heads exits 2" expect_exit 2 \
    "$cz" sim "$root/experiments/engine/cpu.json" --set cost.tp=3
check "... naming cost.tp and the heads" grep -q "'cost.tp': 3 does not divide the 8 attention heads" "$tmp/cmd.err"
check "a divisor is taken" "$cz" sim "$root/experiments/engine/cpu.json" --set cost.tp=2 --quiet
check "a pool too small for any turn exits 2" expect_exit 2 \
    "$cz" sim "$root/experiments/engine/cpu.json" --set server.kv_blocks=1
check "... naming server.kv_blocks and what it needs" grep -q "'server.kv_blocks': 1 blocks of 16 tokens.*expected at least 2 blocks" "$tmp/cmd.err"
check "disaggregation with a pipeline exits 2" expect_exit 2 \
    "$cz" sim "$root/experiments/disagg/distserve_2p1d.json" --set pipeline.llm.replicas=2
check "... naming both fields" grep -q "disaggregation: and field 'pipeline': expected one of them" "$tmp/cmd.err"
check "disaggregation of a spoken pipeline exits 2" expect_exit 2 \
    "$cz" sim "$root/experiments/disagg/distserve_2p1d.json" --set model=qwen3-omni
check "... naming the model's stages" grep -q "expected a model of one autoregressive stage" "$tmp/cmd.err"
check "a pool's tp that does not divide the heads exits 2, naming the pool" expect_exit 2 \
    "$cz" sim "$root/experiments/disagg/distserve_2p1d.json" --set disaggregation.decode.tp=3
check "... as disaggregation.decode.tp" grep -q "'disaggregation.decode.tp': 3 does not divide" "$tmp/cmd.err"
check "a sweep's goodput names a grid key" bash -c \
    "printf '{\"base\": \"%s\", \"grid\": {\"seed\": [1]}, \"report\": [\"gpus\"], \"goodput\": {\"rate\": \"rate\"}}' '$root/experiments/disagg/distserve_2p1d.json' > '$tmp/gp.json'; '$cz' sweep '$tmp/gp.json' > /dev/null 2> '$tmp/gp.err'; [ \$? = 2 ] && grep -q \"goodput: field 'rate': 'rate' is not a key of the grid\" '$tmp/gp.err'"
# Summary keys: vLLM's metadata, --percentiles, and the docs listing exactly the keys written
dk="$tmp/dk"
mkdir -p "$dk"
check "summaries of every kind: text, spoken, cross-stage, streams, classes, theory, disaggregated, replay, http" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=200 --set slo.ttft_ms=1000 --summary '$dk/text.json' &&
     '$cz' sim '$root/experiments/liveserve/sharegpt_audio.json' --quiet --set workload.max_requests=40 \
        --set server.kv_idle=offload --set server.kv_preload=true --summary '$dk/spoken.json' &&
     '$cz' sim '$vlm' --quiet --set workload.synthetic.requests=60 --summary '$dk/vlm.json' &&
     '$cz' sim '$root/experiments/metronome/aimd.json' --quiet --summary '$dk/streams.json' &&
     '$cz' sim '$root/experiments/bros/mix.json' --quiet --set server.kv_bidirectional=true --summary '$dk/mix.json' &&
     '$cz' sim '$root/experiments/validation/mm1_rho0.5.json' --quiet --summary '$dk/theory.json' &&
     '$cz' sim '$root/experiments/disagg/distserve_2p1d.json' --quiet --set workload.synthetic.requests=100 --summary '$dk/pd.json' &&
     '$cz' replay '$root/experiments/engine/cpu.json' --quiet --no-progress --set workload.max_requests=2 --summary '$dk/replay.json' &&
     '$cz' replay '$root/experiments/engine/cpu.json' --quiet --set workload.max_requests=2 \
        --set workload.time_scale=0.01 --endpoint http://127.0.0.1:9 --summary '$dk/http.json'"
check "every summary key is in docs/metrics.md or docs/playback.md, and every key they list is written" \
    python3 "$root/tests/doc_keys.py" "$root" "$dk"/text.json "$dk"/spoken.json "$dk"/vlm.json \
        "$dk"/streams.json "$dk"/mix.json "$dk"/theory.json "$dk"/pd.json "$dk"/replay.json "$dk"/http.json
check "vLLM's metadata: a simulation's date is null, its backend cadenza-sim" bash -c \
    "python3 -c \"import json; d=json.load(open('$dk/text.json')); assert d['date'] is None and d['backend']=='cadenza-sim' and d['model_id']=='llama-3-8b' and d['num_prompts']==d['requests']==200 and list(d)[:9]==['date','backend','model_id','num_prompts','request_rate','burstiness','max_concurrency','max_concurrent_requests','max_output_tokens_per_s'], list(d)[:9]\""
check "a replay names its backends and stamps its date" bash -c \
    "python3 -c \"import json,re; d=json.load(open('$dk/replay.json')); assert d['backend']=='cadenza-engine' and d['kernel_backend']=='cpu' and re.fullmatch(r'[0-9]{8}-[0-9]{6}', d['date']), d['date']\""
check "request_rate and burstiness: Poisson, closed loop" bash -c \
    "python3 -c \"import json; v=json.load(open('$dk/vlm.json')); s=json.load(open('$dk/spoken.json')); assert v['request_rate']==0.5 and v['burstiness']==1 and v['max_concurrency'] is None and s['request_rate']=='inf' and s['burstiness'] is None and s['max_concurrency']==8 and 0<s['max_concurrent_requests']<=8, (v['request_rate'], s['request_rate'])\""
check "vLLM-Omni's audio names: audio_continuity_ok_rate, total_audio_frames at 24 kHz" bash -c \
    "python3 -c \"import json; s=json.load(open('$dk/spoken.json')); assert 'continuity_ok_rate' not in s and 0<=s['audio_continuity_ok_rate']<=1 and abs(s['total_audio_frames']-24000*s['total_audio_duration_s'])<=s['spoken_turns'], s['total_audio_frames']\""
# one request alone: every bucket holds at most it, and its tokens come one per step
cat >"$tmp/one.json" <<'JSON'
{"workload": {"synthetic": {"requests": 1, "input_tokens": 1, "output_tokens": 40},
              "arrivals": {"process": "poisson", "rate_rps": 1}},
 "cost": {"kind": "service", "service_s": 5.0}}
JSON
# a token every 0.125 s from 0.125 s: 7 in the first second, 8 in each next
check "peaks of one request at 8 tokens/s: 1 in flight, 8 tokens in a second" bash -c \
    "'$cz' sim '$tmp/one.json' --quiet --summary '$tmp/one.out.json' &&
     python3 -c \"import json; d=json.load(open('$tmp/one.out.json')); assert d['max_concurrent_requests']==1 and d['max_output_tokens_per_s']==8 and d['mean_e2el_ms']==5000, (d['max_concurrent_requests'], d['max_output_tokens_per_s'])\""
check "SOURCE_DATE_EPOCH dates a simulation, the same bytes twice" bash -c \
    "SOURCE_DATE_EPOCH=86400 '$cz' sim '$cfg' --quiet --set workload.max_requests=50 --summary '$tmp/d1.json' &&
     SOURCE_DATE_EPOCH=86400 '$cz' sim '$cfg' --quiet --set workload.max_requests=50 --summary '$tmp/d2.json' &&
     cmp '$tmp/d1.json' '$tmp/d2.json' && grep -q '\"date\":[[:space:]]*\"19700102-000000\"' '$tmp/d1.json'"
check "a bad SOURCE_DATE_EPOCH exits 2 naming it" bash -c \
    "SOURCE_DATE_EPOCH=yesterday '$cz' sim '$cfg' --quiet --summary '$tmp/d3.json' 2>'$tmp/d.err'; [ \$? -eq 2 ] &&
     grep -q SOURCE_DATE_EPOCH '$tmp/d.err' && [ ! -e '$tmp/d3.json' ]"
check "--percentiles 25,50,99.9 writes vLLM's names for every metric" bash -c \
    "'$cz' sim '$root/experiments/liveserve/sharegpt_audio.json' --quiet --set workload.max_requests=20 \
        --percentiles 25,50,99.9 --summary '$tmp/p.json' &&
     python3 -c \"import json; d=json.load(open('$tmp/p.json')); ks=[k for k in d if k.startswith('p') and k[1:2].isdigit()];
assert sorted(k for k in ks if k.endswith('_ttft_ms'))==['p25_ttft_ms','p50_ttft_ms','p99.9_ttft_ms'] and 'p99.9_audio_ttfp_ms' in d and 'p90_ttft_ms' not in d and d['p25_ttft_ms']<=d['p50_ttft_ms']<=d['p99.9_ttft_ms']<=d['max_ttft_ms'], ks\""
check "the default percentiles are p50, p90, p95, p99" bash -c \
    "python3 -c \"import json; d=json.load(open('$dk/text.json')); assert [k for k in d if k.endswith('_ttft_ms')]==['mean_ttft_ms','median_ttft_ms','std_ttft_ms','p50_ttft_ms','p90_ttft_ms','p95_ttft_ms','p99_ttft_ms','max_ttft_ms']\""
for bad in 0 101 x '' 5,5 '50,' nan; do
    check "--percentiles '$bad' exits 2 naming the flag" bash -c \
        "'$cz' sim '$cfg' --quiet --percentiles '$bad' 2>'$tmp/p.err'; [ \$? -eq 2 ] && grep -q -- '--percentiles' '$tmp/p.err'"
done
# Percentiles: a sketch within 1 % of the exact values, exact on request and by default
# while the samples fit their budget
for e in default liveserve/sharegpt_audio metronome/aimd bros/mix; do
    n=$(echo "$e" | tr / _)
    check "$e: sketch percentiles within 1 % of the exact ones, every other key identical" bash -c \
        "'$cz' sim '$root/experiments/$e.json' --quiet --percentiles 10,50,90,99,99.9 --set metrics.percentiles=sketch --summary '$tmp/pm_$n.s.json' &&
         '$cz' sim '$root/experiments/$e.json' --quiet --percentiles 10,50,90,99,99.9 --exact-percentiles \
            --summary '$tmp/pm_$n.e.json' &&
         python3 '$root/tests/pct_modes.py' '$tmp/pm_$n.s.json' '$tmp/pm_$n.e.json'"
done
check "metrics.percentiles: \"exact\" is --exact-percentiles" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=100 --set metrics.percentiles=exact --summary '$tmp/pm_a.json' &&
     '$cz' sim '$cfg' --quiet --set workload.max_requests=100 --exact-percentiles --summary '$tmp/pm_b.json' &&
     cmp '$tmp/pm_a.json' '$tmp/pm_b.json'"
check "by default a run whose samples fit the budget reports exact percentiles" bash -c \
    "'$cz' sim '$cfg' --quiet --set workload.max_requests=300 --set server.max_num_seqs=4 --summary '$tmp/pm_d.json' &&
     '$cz' sim '$cfg' --quiet --set workload.max_requests=300 --set server.max_num_seqs=4 --exact-percentiles --summary '$tmp/pm_e.json' &&
     grep -q '\"percentile_mode\":[[:space:]]*\"exact\"' '$tmp/pm_d.json' &&
     python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); a.pop(\"config\"); b.pop(\"config\"); sys.exit(a!=b)' '$tmp/pm_d.json' '$tmp/pm_e.json'"
check "a bad metrics.percentiles exits 2 naming the field" bash -c \
    "'$cz' sim '$cfg' --quiet --set metrics.percentiles=approx 2>'$tmp/pm.err'; [ \$? -eq 2 ] &&
     grep -q \"field 'percentiles'\" '$tmp/pm.err' && grep -q sketch '$tmp/pm.err'"
check "sweep --exact-percentiles" bash -c \
    "printf '{\"name\": \"pm\", \"base\": \"%s\", \"grid\": {\"server.max_num_seqs\": [8]}, \"report\": [\"p99_ttft_ms\"]}' '$cfg' >'$tmp/pm_sweep.json' &&
     '$cz' sweep '$tmp/pm_sweep.json' --set workload.max_requests=50 --exact-percentiles --quiet -o '$tmp/pm_sweep.jsonl' &&
     grep -q '\"percentile_mode\":[[:space:]]*\"exact\"' '$tmp/pm_sweep.jsonl'"

# Sweep tables: whole names, one format per column
cat >"$tmp/sweep_t.json" <<JSON
{"name": "t", "base": "$cfg", "grid": {"server.max_num_seqs": [8, 64]},
 "report": ["completed", "p90_ttft_ms", "max_output_tokens_per_s"]}
JSON
check "sweep table: whole column names and one number format per column" bash -c \
    "'$cz' sweep '$tmp/sweep_t.json' --set workload.max_requests=100 >'$tmp/t.out' 2>/dev/null &&
     head -2 '$tmp/t.out' | tail -1 | grep -q 'server.max_num_seqs completed p90_ttft_ms max_output_tokens_per_s' &&
     python3 -c \"
import re
rows = open('$tmp/t.out').read().splitlines()[2:4]
cells = [r.split() for r in rows]
assert all(c[1].isdigit() and c[3].isdigit() for c in cells), cells
dec = {len(c[2].split('.')[1]) for c in cells if '.' in c[2]}
assert len(dec) == 1 and all('.' in c[2] for c in cells), cells
assert len(set(len(r) for r in rows)) == 1, rows\""

# Seeds: one run per seed, the documented row, and the interval of the mean
cat >"$tmp/seeded.json" <<'JSON'
{"workload": {"synthetic": {"requests": 100, "input_tokens": 200, "output_tokens": 100},
              "arrivals": {"process": "poisson", "rate_rps": 20}}}
JSON
cat >"$tmp/sweep_s.json" <<JSON
{"name": "s", "base": "$tmp/seeded.json", "grid": {"server.max_num_seqs": [8, 64]},
 "report": ["completed", "p90_ttft_ms", "request_goodput"], "seeds": [1, 2, 3]}
JSON
check "sweep with seeds: progress per point and seed, the documented rows" bash -c \
    "'$cz' sweep '$tmp/sweep_s.json' --set workload.max_requests=100 -o '$tmp/s1.jsonl' >'$tmp/s.out' 2>'$tmp/s.err' &&
     grep -q 'point 2/2 seed 3 done' '$tmp/s.err' && grep -q ' ± ' '$tmp/s.out' &&
     python3 -c \"
import json
rows = [json.loads(l) for l in open('$tmp/s1.jsonl')]
assert len(rows) == 2
for r in rows:
    assert list(r) == ['point', 'seeds', 'summaries', 'mean', 'ci95', 'sweep'] and r['seeds'] == [1, 2, 3]
    assert [s['seed'] for s in r['summaries']] == [1, 2, 3]
    v = [s['p90_ttft_ms'] for s in r['summaries']]
    assert abs(r['mean']['p90_ttft_ms'] - sum(v) / 3) < 1e-9 * abs(sum(v))
    lo, hi = r['ci95']['p90_ttft_ms']
    assert lo < r['mean']['p90_ttft_ms'] < hi, (lo, hi)
    assert r['mean']['request_goodput'] is None and r['ci95']['request_goodput'] is None
\""
check "the interval is the Student-t one (t = 4.303 for 3 seeds)" bash -c \
    "python3 -c \"
import json, statistics
r = json.loads(open('$tmp/s1.jsonl').readline())
v = [s['p90_ttft_ms'] for s in r['summaries']]
half = 4.302652729911275 * statistics.stdev(v) / 3 ** 0.5
lo, hi = r['ci95']['p90_ttft_ms']
assert abs((hi - lo) / 2 - half) < 1e-6 * half, (hi - lo, half)\""
check "a deterministic sweep with seeds gives identical output twice" bash -c \
    "'$cz' sweep '$tmp/sweep_s.json' --quiet --set workload.max_requests=100 -o '$tmp/s2.jsonl' && cmp '$tmp/s1.jsonl' '$tmp/s2.jsonl'"
check "--seeds 1: the interval has zero width, and overrides the file's seeds" bash -c \
    "'$cz' sweep '$tmp/sweep_s.json' --quiet --seeds 1 --set workload.max_requests=100 -o '$tmp/s3.jsonl' &&
     python3 -c \"
import json
for l in open('$tmp/s3.jsonl'):
    r = json.loads(l)
    assert r['seeds'] == [1] and len(r['summaries']) == 1
    m = r['mean']['p90_ttft_ms']
    assert r['ci95']['p90_ttft_ms'] == [m, m] and m == r['summaries'][0]['p90_ttft_ms']\""
check "without seeds the rows are {point, summary, sweep}" bash -c \
    "'$cz' sweep '$tmp/sweep.json' --quiet --set workload.max_requests=20 -o '$tmp/s4.jsonl' &&
     python3 -c \"import json; assert all(list(json.loads(l)) == ['point', 'summary', 'sweep'] for l in open('$tmp/s4.jsonl'))\""
for bad in '[]' '[1, 1]' '[1.5]' '[-1]' '"3"'; do
    sed "s/\"seeds\": \[1, 2, 3\]/\"seeds\": $bad/" "$tmp/sweep_s.json" >"$tmp/sweep_bad.json"
    check "seeds $bad exits 2 naming the field" bash -c \
        "'$cz' sweep '$tmp/sweep_bad.json' --quiet -o '$tmp/sb.jsonl' 2>'$tmp/sb.err'; [ \$? -eq 2 ] &&
         grep -q \"field 'seeds'\" '$tmp/sb.err' && [ ! -e '$tmp/sb.jsonl' ]"
done
check "--seeds 0 exits 2 naming the flag" bash -c \
    "'$cz' sweep '$tmp/sweep_s.json' --quiet --seeds 0 2>'$tmp/sb.err'; [ \$? -eq 2 ] && grep -q -- '--seeds' '$tmp/sb.err'"
check "--seeds on a grid of seeds exits 2 naming both, before any run" bash -c \
    "'$cz' sweep $root/experiments/validation/sweep_nova_tableV.json --quiet --seeds 5 -o '$tmp/sg.jsonl' 2>'$tmp/sg.err'; [ \$? -eq 2 ] &&
     grep -q 'grid.seed and --seeds' '$tmp/sg.err' && [ ! -e '$tmp/sg.jsonl' ] && [ ! -e '$tmp/sg.jsonl.partial' ]"
check "an unknown object made by --set is blamed on the --set" bash -c \
    "'$cz' sim $root/experiments/default.json --set foo.bar=1 2>'$tmp/us.err'; [ \$? -eq 2 ] && grep -q -- '--set foo.bar=1: unknown field' '$tmp/us.err'"
check "a model card not found lists the cards there" bash -c \
    "'$cz' sim $root/experiments/default.json --set model=nope 2>'$tmp/mc.err'; [ \$? -eq 2 ] && grep -q 'known: .*llama-3-8b' '$tmp/mc.err'"
check "--summary naming a folder exits before the run, naming the flag" bash -c \
    "mkdir -p '$tmp/adir' && '$cz' sim $root/experiments/default.json --summary '$tmp/adir' >'$tmp/sd.out' 2>'$tmp/sd.err'; [ \$? -eq 1 ] &&
     grep -q -- '--summary: cannot write' '$tmp/sd.err' && [ ! -s '$tmp/sd.out' ]"
check "trace info on a trace without timestamps prints no nan" bash -c \
    "'$cz' trace info $root/traces/data/sharegpt/sharegpt_sample.json >'$tmp/ti.out' && ! grep -qi nan '$tmp/ti.out' &&
     grep -q 'no timestamps' '$tmp/ti.out'"

# Inputs that cannot be opened: exit 2, naming the argument, flag or field that named the
# file and the path as opened.
fails_naming() { # text stderr must hold, command...: exits 2
    local want=$1
    shift
    "$@" >"$tmp/fn.out" 2>"$tmp/fn.err"
    local rc=$?
    [ "$rc" -eq 2 ] || { echo "exit $rc, expected 2"; cat "$tmp/fn.err"; return 1; }
    grep -qF -- "$want" "$tmp/fn.err" || { echo "stderr lacks: $want"; cat "$tmp/fn.err"; return 1; }
}
nofile="(No such file or directory)"
mkdir "$tmp/in"
for c in sim replay profile validate; do
    check "$c: a missing config names the argument" \
        fails_naming "config argument: cannot open '$tmp/in/none.json' $nofile" \
        "$cz" $c "$tmp/in/none.json" -o "$tmp/in/o.h5"
done
check "sim: a folder given as the config" \
    fails_naming "config argument: cannot open '$tmp/in' (Is a directory)" "$cz" sim "$tmp/in"
printf '{"workload": {"trace": {"path": "x.csv"}, "arrivals": {"process": "trace"}}}\n' >"$tmp/in/trace.json"
check "sim: a missing trace names workload.trace.path" \
    fails_naming "trace.json: workload.trace.path: cannot open '$tmp/in/x.csv' $nofile" \
    "$cz" sim "$tmp/in/trace.json"
printf '{"workload": {"synthetic": {"requests": 3, "input_tokens": {"dist": "trace", "path": "l.csv"}, "output_tokens": 4}, "arrivals": {"process": "poisson", "rate_rps": 1}}}\n' >"$tmp/in/lengths.json"
check "sim: a missing length trace names its field" \
    fails_naming "lengths.json: workload.synthetic.input_tokens.path: cannot open '$tmp/in/l.csv' $nofile" \
    "$cz" sim "$tmp/in/lengths.json"
check "sim: an unknown model card names 'model' and where cards are looked up" \
    fails_naming "--set model=nope: model: model card 'nope': cannot open '$root/models/cards/nope.json' $nofile; cards by name are looked up in the data folder" \
    "$cz" sim --set model=nope
mkdir -p "$tmp/in/cards" && cp "$root/models/cards/llama-3-8b.json" "$tmp/in/cards/"
check "sim: an unknown hardware card names 'hardware' and \$CZ_CARDS_DIR" \
    fails_naming "hardware: hardware card 'nope': cannot open '$tmp/in/hw/nope.json' $nofile; cards by name are looked up in \$CZ_CARDS_DIR" \
    env CZ_CARDS_DIR="$tmp/in" "$cz" sim "$cfg" --set hardware=nope
check "sim: a card path that does not exist names 'model'" \
    fails_naming "--set model=$tmp/in/m.json: model: cannot open '$tmp/in/m.json' $nofile" \
    "$cz" sim "$cfg" --set model="$tmp/in/m.json"
check "sim --cost: a missing cost file names the flag" \
    fails_naming "--cost: cannot open '$tmp/in/c.json' $nofile" "$cz" sim "$cfg" --cost "$tmp/in/c.json"
check "sim: a missing cost.file names the field (a --set path: from the working directory)" \
    fails_naming "default.json: cost.file: cannot open '$tmp/in/c.json' $nofile" \
    bash -c "cd '$tmp/in' && exec '$cz' sim '$cfg' --set 'cost={\"kind\": \"fitted\", \"file\": \"c.json\"}'"
check "sweep: a missing sweep file names the argument" \
    fails_naming "sweep argument: cannot open '$tmp/in/none.json' $nofile" "$cz" sweep "$tmp/in/none.json"
printf '{"base": "nobase.json", "grid": {"seed": [1]}, "report": ["completed"]}\n' >"$tmp/in/sweep.json"
check "sweep: a missing base names the field" \
    fails_naming "sweep.json: field 'base': cannot open '$tmp/in/nobase.json' $nofile" \
    "$cz" sweep "$tmp/in/sweep.json"
check "calibrate: a missing input names the argument" \
    fails_naming "input argument: cannot open '$tmp/in/p.h5' $nofile" \
    "$cz" calibrate "$tmp/in/p.h5" -o "$tmp/in/cost.json"
check "generate --model: a missing path names the flag" \
    fails_naming "--model: cannot open '$tmp/in/ckpt' $nofile" \
    "$cz" generate --model "$tmp/in/ckpt" --tokens 1 --max-tokens 1
check "generate --model: a missing card file names the flag" \
    fails_naming "--model: cannot open '$tmp/in/card.json' $nofile" \
    "$cz" generate --model "$tmp/in/card.json" --tokens 1 --max-tokens 1
check "generate --model: a folder without config.json names the flag and the file" \
    fails_naming "--model: cannot open '$tmp/in/config.json' $nofile" \
    "$cz" generate --model "$tmp/in" --tokens 1 --max-tokens 1
check "replay: a missing engine.weights folder names the field" \
    fails_naming "engine.weights: cannot open '$tmp/in/ckpt' $nofile" \
    "$cz" replay "$root/experiments/engine/cpu.json" --quiet --set engine.weights="$tmp/in/ckpt"
for sub in info convert; do
    check "trace $sub: a missing trace names the argument" \
        fails_naming "trace argument: cannot open '$tmp/in/t.csv' $nofile" \
        "$cz" trace $sub "$tmp/in/t.csv" $([ $sub = convert ] && echo -o "$tmp/in/t.jsonl")
done
check "no output is left by a failed input" bash -c "[ -z \"\$(ls -A '$tmp/in' | grep -v '\\.json\$\\|^cards\$')\" ]"

# Outputs whose folder does not exist: the command fails before any work, exit 1 (an
# output that cannot be written), naming the flag and the path, and leaves no file (the
# temporaries of the outputs already registered are removed).
mkdir "$tmp/outs"
out_fails() { # flag, path, command...
    local flag=$1 path=$2
    shift 2
    local t0 rc ms
    t0=$(date +%s%N)
    "$@" >"$tmp/of.out" 2>"$tmp/of.err"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$rc" -eq 1 ] || { echo "exit $rc, expected 1"; cat "$tmp/of.err"; return 1; }
    grep -qF -- "cadenza: $flag: cannot write '$path' $nofile" "$tmp/of.err" ||
        { echo "stderr lacks the flag and path"; cat "$tmp/of.err"; return 1; }
    [ "$ms" -lt 3000 ] || { echo "took $ms ms"; return 1; }
    [ -z "$(ls -A "$tmp/outs")" ] || { echo "left: $(ls -A "$tmp/outs")"; return 1; }
}
nd=$tmp/no-such-dir
engine_cfg="$root/experiments/engine/cpu.json"
check "sim -o" out_fails -o "$nd/r.h5" "$cz" sim "$big" --quiet -o "$nd/r.h5" --summary "$tmp/outs/s.json"
check "sim --summary" out_fails --summary "$nd/s.json" \
    "$cz" sim "$big" --quiet -o "$tmp/outs/r.h5" --summary "$nd/s.json"
check "replay -o" out_fails -o "$nd/r.h5" "$cz" replay "$engine_cfg" --quiet -o "$nd/r.h5"
check "replay --summary" out_fails --summary "$nd/s.json" \
    "$cz" replay "$engine_cfg" --quiet -o "$tmp/outs/r.h5" --summary "$nd/s.json"
cat >"$tmp/sweep_big.json" <<JSON
{"base": "$big", "grid": {"server.max_num_seqs": [8, 64]}, "report": ["completed"]}
JSON
check "sweep -o" out_fails -o "$nd/w.jsonl" "$cz" sweep "$tmp/sweep_big.json" --quiet -o "$nd/w.jsonl"
check "profile -o" out_fails -o "$nd/p.h5" "$cz" profile "$engine_cfg" -o "$nd/p.h5"
check "calibrate -o (before its inputs are read)" out_fails -o "$nd/c.json" \
    "$cz" calibrate "$tmp/in/p.h5" -o "$nd/c.json"
check "validate -o" out_fails -o "$nd/v.h5" "$cz" validate "$engine_cfg" --quiet -o "$nd/v.h5"
check "validate --summary" out_fails --summary "$nd/v.json" \
    "$cz" validate "$engine_cfg" --quiet -o "$tmp/outs/v.h5" --summary "$nd/v.json"
check "trace convert -o" out_fails -o "$nd/t.jsonl" "$cz" trace convert "$azure" -o "$nd/t.jsonl"
check "generate --logits" out_fails --logits "$nd/l.bin" \
    "$cz" generate --model tiny-llama --tokens 1 --max-tokens 500 --logits "$nd/l.bin"
# Defaults and traps a new user meets
mooncake=$root/traces/data/mooncake_conversation/conversation_trace_head.jsonl
check "the card's context limit is max_model_len's default, as in vLLM (Mooncake on llama-3-8b)" bash -c \
    "'$cz' sim --trace '$mooncake' --quiet --summary '$tmp/mc.json' &&
     '$cz' sim --trace '$mooncake' --quiet --set server.max_model_len=0 --summary '$tmp/mc0.json' &&
     python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(not (a[\"rejected\"]==1015 and b[\"rejected\"]==0 and a[\"requests\"]==2000))' '$tmp/mc.json' '$tmp/mc0.json'"
check "a cross-stage scheduler on a text model exits 2 naming the field and the schedulers that fit" bash -c \
    "'$cz' sim --quiet --set scheduler=nova_chunked_prefill 2>'$tmp/xs.err'; [ \$? -eq 2 ] &&
     grep -q \"^cadenza: --set scheduler=nova_chunked_prefill: field 'scheduler'\" '$tmp/xs.err' &&
     grep -q 'no vision encoder' '$tmp/xs.err' && grep -q 'fcfs' '$tmp/xs.err'"
check "an unknown model from --set is blamed on the --set, listing the cards" bash -c \
    "'$cz' sim --quiet --set model=nope 2>'$tmp/mn.err'; [ \$? -eq 2 ] &&
     grep -q '^cadenza: --set model=nope: ' '$tmp/mn.err' && grep -q 'llama-3-8b' '$tmp/mn.err'"
check "sim: Ctrl-C writes the partial summary, marked partial" python3 - "$cz" "$root" "$tmp" <<'PY'
import json, signal, subprocess, sys, time
cz, root, tmp = sys.argv[1:]
p = subprocess.Popen([cz, 'sim', root + '/experiments/bench/sim_100k_1h.json', '--no-progress',
                      '--set', 'workload.synthetic.requests=3000000', '--summary', tmp + '/int.json'],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
time.sleep(1.5)
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=120)
assert p.returncode == 0, (p.returncode, err)
assert b'partial run: stopped at' in out, out
s = json.load(open(tmp + '/int.json'))
assert s['partial'] is True and s['unfinished'] > 0, s
assert s['completed'] + s['unfinished'] + s['rejected'] + s['aborted'] + s['failed'] == s['requests']
PY

# Bringing one's own trace and model
check "--trace on sim replaces the workload's trace (format detected)" bash -c \
    "'$cz' sim --trace '$root/traces/data/burstgpt3/BurstGPT_3_head.csv' --quiet --summary '$tmp/tr.json' &&
     grep -q 'BurstGPT_3_head.csv' '$tmp/tr.json'"
check "--trace on sweep" bash -c \
    "printf '{\"base\": \"%s\", \"grid\": {\"server.max_num_seqs\": [8]}, \"report\": [\"completed\"]}' '$cfg' >'$tmp/trs.json' &&
     '$cz' sweep '$tmp/trs.json' --trace '$mooncake' --quiet -o '$tmp/trs.jsonl' && grep -q 'conversation_trace_head' '$tmp/trs.jsonl'"
h5table=$(dirname "$cz")/../tests/h5table
check "results rows join back to the trace: /sessions names each session by its trace id" bash -c \
    "'$cz' sim --trace '$mooncake' --quiet -o '$tmp/ids.h5' &&
     '$h5table' '$tmp/ids.h5' /sessions >'$tmp/ids.txt' &&
     python3 -c 'import sys; rows=[l.split(\"\t\") for l in open(sys.argv[1]).read().split(\"\n\")[1:] if l]; sys.exit(not (len(rows)==2000 and rows[0][0]==\"0\" and rows[0][2]==\"req-1\" and rows[1999][2]==\"req-2000\"))' '$tmp/ids.txt'"
check "replay --trace that does not exist exits 2 naming the flag" bash -c \
    "'$cz' replay '$root/experiments/engine/cpu.json' --trace '$tmp/none.csv' --quiet 2>'$tmp/rtn.err'; [ \$? -eq 2 ] && grep -q -- '--trace' '$tmp/rtn.err'"
check "--trace that does not exist exits 2 naming the flag" bash -c \
    "'$cz' sim --trace '$tmp/none.csv' --quiet 2>'$tmp/tn.err'; [ \$? -eq 2 ] && grep -q -- '--trace' '$tmp/tn.err'"
mkdir -p "$tmp/cwd"
cp "$root/traces/data/burstgpt3/BurstGPT_3_head.csv" "$tmp/cwd/mine.csv"
check "a relative path given with --set is relative to the working directory" bash -c \
    "cd '$tmp/cwd' && '$cz' sim '$cfg' --quiet --set workload.trace.path=mine.csv --summary s.json &&
     grep -q '\"path\":[[:space:]]*\"$tmp/cwd/mine.csv\"' s.json"
check "paths join with one slash" bash -c \
    "cd / && '$cz' sim '${cfg#/}' --quiet --set workload.trace.path=nowhere.csv 2>'$tmp/sl.err'; ! grep -q '//' '$tmp/sl.err' && grep -q '/nowhere.csv' '$tmp/sl.err'"
mkdir -p "$tmp/my-llama"
cat >"$tmp/my-llama/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
 "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
 "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
 "rope_theta": 500000.0, "max_position_embeddings": 8192, "tie_word_embeddings": false,
 "hidden_act": "silu"}
JSON
check "cadenza card writes a card from a checkpoint's config.json (llama-3-8b's numbers)" bash -c \
    "'$cz' card '$tmp/my-llama' -o '$tmp/my.json' 2>/dev/null &&
     python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))[\"stages\"][0]; sys.exit(not (s[\"params\"]==8030261248 and s[\"max_position_embeddings\"]==8192))' '$tmp/my.json' &&
     '$cz' sim --quiet --set model='$tmp/my.json' --set workload.max_requests=50"
check "sim --model DIR takes a checkpoint folder" bash -c \
    "cd '$tmp' && '$cz' sim --model my-llama --quiet --set workload.max_requests=200 --summary '$tmp/md.json' &&
     '$cz' sim --quiet --set workload.max_requests=200 --summary '$tmp/md8.json' &&
     python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a[\"p90_ttft_ms\"]!=b[\"p90_ttft_ms\"])' '$tmp/md.json' '$tmp/md8.json'"
check "cadenza cards lists the model and hardware cards" bash -c \
    "'$cz' cards >'$tmp/cards.txt' && grep -q 'llama-3-8b .*8192' '$tmp/cards.txt' && grep -q h100-sxm '$tmp/cards.txt'"
check "card and cards have --help" bash -c "'$cz' card --help >/dev/null && '$cz' cards --help >/dev/null"

# A cost file records where it was measured
python3 - "$tmp/cost_cpu.json" <<'PY'
import json, sys
json.dump({"kind": "fitted", "model": "tiny-llama", "hardware": "cpu-host", "stages": {"llm": {}}}, open(sys.argv[1], "w"))
PY
check "a cost file measured on other hardware is refused, naming both" bash -c \
    "'$cz' sim --quiet --model tiny-llama --cost '$tmp/cost_cpu.json' 2>'$tmp/hw.err'; [ \$? -eq 2 ] &&
     grep -q \"hardware 'cpu-host', not this config's 'h100-sxm'\" '$tmp/hw.err' &&
     '$cz' sim --quiet --model tiny-llama --cost '$tmp/cost_cpu.json' --set hardware=cpu-host --set workload.max_requests=20"

# Sweeps keep finished work
cat >"$tmp/sw_late.json" <<JSON
{"base": "$cfg", "grid": {"server.max_num_seqs": [8, 16, 0]}, "report": ["completed"]}
JSON
check "sweep: a bad value at the last point fails before the first runs" bash -c \
    "'$cz' sweep '$tmp/sw_late.json' -o '$tmp/late.jsonl' 2>'$tmp/late.err'; [ \$? -eq 2 ] &&
     grep -q 'point 3' '$tmp/late.err' && ! grep -q 'point 1/3 done' '$tmp/late.err' && [ ! -e '$tmp/late.jsonl.partial' ]"
cat >"$tmp/sw_rep.json" <<JSON
{"base": "$cfg", "grid": {"server.max_num_seqs": [8]}, "report": ["completed", "p90_ttft"]}
JSON
check "sweep: a report key that names nothing is an error" bash -c \
    "'$cz' sweep '$tmp/sw_rep.json' --set workload.max_requests=50 --quiet 2>'$tmp/rep.err'; [ \$? -eq 2 ] &&
     grep -q \"'p90_ttft' is not in point 1's summary\" '$tmp/rep.err' &&
     grep -q \"'p90_ttft' is not a key of any point's summary\" '$tmp/rep.err' && grep -q 'p90_ttft_ms' '$tmp/rep.err'"
cat >"$tmp/sw_keep.json" <<JSON
{"base": "$root/experiments/validation/mm1_rho0.5.json", "report": ["completed"],
 "grid": {"workload.arrivals.rate_rps": [1e-9], "workload.time_scale": [1, 1e9]}}
JSON
check "sweep: a report key some points lack is a column with nulls there" bash -c \
    "printf '{\"base\": \"%s\", \"grid\": {\"server.kv_bidirectional\": [false, true]}, \"report\": [\"kv_overwrites\"]}' '$root/experiments/bros/mix.json' >'$tmp/sw_some.json' &&
     '$cz' sweep '$tmp/sw_some.json' --set workload.max_requests=200 --quiet -o '$tmp/some.jsonl'"
check "sweep: a run that fails keeps the finished rows in FILE.partial" bash -c \
    "'$cz' sweep '$tmp/sw_keep.json' --set workload.synthetic.requests=3 -o '$tmp/keep.jsonl' 2>'$tmp/keep.err'; [ \$? -eq 2 ] &&
     [ \$(wc -l <'$tmp/keep.jsonl.partial') -eq 1 ] && grep -q -- '--resume' '$tmp/keep.err'"
# routers: a field of a router given by name can be set; a bad policy names the field
check "--set router.signal_delay_s on a router given by name" "$cz" sim "$root/experiments/default.json" \
    --set workload.max_requests=20 --set router.signal_delay_s=0.1 --set router.policy=power_of_two \
    --set pipeline.llm.replicas=40 --quiet
check "an unknown router is an input error" expect_exit 2 "$cz" sim "$root/experiments/default.json" \
    --set router.policy=nearest
check "... naming the field" grep -q "router.policy" "$tmp/cmd.err"
check "the prefix-aware routers on the Mooncake slice with prefix caching, weights set by name" \
    "$cz" sim --trace "$root/traces/data/mooncake_conversation/conversation_trace_head.jsonl" \
    --set workload.max_requests=100 --set server.prefix_caching=true --set server.max_model_len=0 \
    --set pipeline.llm.replicas=4 --set router=llm_d --set router.queue_weight=1 --quiet
check "... and Dynamo's" "$cz" sim --trace \
    "$root/traces/data/mooncake_conversation/conversation_trace_head.jsonl" \
    --set workload.max_requests=100 --set server.prefix_caching=true --set server.max_model_len=0 \
    --set pipeline.llm.replicas=4 --set router.policy=kv_router --set router.overlap_score_weight=2 \
    --quiet
check "... tracking output blocks" "$cz" sim --trace \
    "$root/traces/data/mooncake_conversation/conversation_trace_head.jsonl" \
    --set workload.max_requests=100 --set server.prefix_caching=true --set server.max_model_len=0 \
    --set pipeline.llm.replicas=4 --set router.policy=kv_router \
    --set router.track_output_blocks=true --quiet
check "a router switch that is not a boolean is an input error" expect_exit 2 "$cz" sim \
    "$root/experiments/default.json" --set router.policy=kv_router --set router.track_output_blocks=1
check "... naming the field" grep -q "track_output_blocks': expected true or false" "$tmp/cmd.err"
check "a negative router weight is an input error" expect_exit 2 "$cz" sim \
    "$root/experiments/default.json" --set router.policy=llm_d --set router.kv_weight=-1
check "... naming the field" grep -q "kv_weight" "$tmp/cmd.err"
check "a fleet on consecutive GPUs" "$cz" sim "$root/experiments/default.json" \
    --set workload.max_requests=50 --set pipeline.llm.replicas=100 --set pipeline.llm.first_gpu=3 \
    --set router=round_robin --quiet
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# tests/accounting.sh CADENZA SOURCE_ROOT - every request accounted for: the runs that once
# lost requests, deadlocked, hung or aborted (each a command a user ran), now each ending
# with completed + aborted + rejected + failed + unfinished == requests (frames and streams
# likewise), or with a clean exit 2 naming the field. Prints "N passed, N failed".
set -u
cz=$(realpath "$1")
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
. "$(dirname "$0")/check.sh"

# runs a sim with a time bound; the summary lands in $tmp/s.json
sim() {
    rm -f "$tmp/s.json"
    timeout 300 "$cz" sim "$@" --quiet --no-progress --summary "$tmp/s.json"
}

# key=value ... : the summary's numbers, compared exactly; "balanced" checks the sums
expect() {
    python3 - "$tmp/s.json" "$@" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ok = True
for a in sys.argv[2:]:
    if a == "balanced":
        total = sum(s[k] for k in ("completed", "aborted", "rejected", "failed", "unfinished"))
        if total != s["requests"]:
            print("requests %s != outcomes %s" % (s["requests"], total)); ok = False
        if "frames" in s:
            f = sum(s[k] for k in ("served_frames", "empty_frames", "rejected_frames",
                                   "unfinished_frames"))
            t = sum(s[k] for k in ("streams_completed", "streams_rejected", "streams_unfinished"))
            if f != s["frames"] or t != s["streams"]:
                print("frames %s vs %s, streams %s vs %s" % (s["frames"], f, s["streams"], t))
                ok = False
        continue
    if ">=" in a:
        k, v = a.split(">=")
        op = ">="
    else:
        k, v = a.split("=")
        op = "="
    got = s.get(k)
    if got is None or (op == "=" and got != float(v)) or (op == ">=" and got < float(v)):
        print("%s: got %s, expected %s %s" % (k, got, op, v)); ok = False
sys.exit(0 if ok else 1)
PY
}

mt=experiments/liveserve/multiturn_burstgpt.json
sa=experiments/liveserve/sharegpt_audio.json

# 1. next-use eviction's speech-start protection filled the pool with KV nobody could
#    evict: 238 completed, 9 failed, 9 rejected, the rest never issued, exit 0
t_next_use() {
    sim $mt --set server.kv_evict=next_use --set pipeline.thinker.kv_blocks=256 &&
        expect balanced requests=299 completed=286 rejected=13 failed=0 unfinished=0
}
t_next_use_voxserve() {
    sim $mt --set server.kv_evict=next_use --set pipeline.thinker.kv_blocks=256 \
        --set scheduler=voxserve && expect balanced requests=299 unfinished=0
}
check "next-use eviction under a small pool serves every turn" t_next_use
check "... and under VoxServe it ends (it hung)" t_next_use_voxserve

# 2. LiveServe's scan stopped at a U1 misfit ranked ahead of the running sequences: 19 of
#    135 completed, exit 0. The talker pool (128 blocks) cannot hold five of the replies:
#    those fail at the talker, after the thinker has completed them
t_liveserve() {
    sim $sa --set seed=556839 --set workload.synthetic.requests=135 \
        --set workload.arrivals.concurrency=16 --set scheduler=liveserve \
        --set server.kv_idle=drop --set pipeline.talker.kv_blocks=128 &&
        expect balanced requests=135 completed=130 failed=5 unfinished=0
}
check "LiveServe never starves running sequences; a talker's refusal is a failure" t_liveserve

# 3. a barge-in during an in-flight preload aborted on an assertion
t_preload_barge() {
    sim $mt --set server.kv_idle=offload --set 'workload.barge_in={"p":1.0}' \
        --set pipeline.thinker.kv_blocks=512 --set server.kv_preload=true &&
        expect balanced requests=299 unfinished=0 'aborted>=100'
}
check "barge-in during a preload" t_preload_barge

# 4. streams whose first frame cannot fit were fed anyway (an assertion); zero tokens per
#    frame passed validation and aborted later
t_streams_tiny_pool() {
    sim experiments/metronome/unbounded.json --set server.kv_blocks=2 &&
        expect balanced streams=96 streams_rejected=96 rejected_frames=14400
}
check "streams refused by a tiny pool are counted, not fed" t_streams_tiny_pool
t_zero_config() { # field
    "$cz" sim experiments/metronome/unbounded.json --set "workload.streams.$1=0" \
        --quiet --no-progress 2>"$tmp/e"
    [ $? -eq 2 ] && grep -q "$1" "$tmp/e"
}
t_zero_trace() { # field
    local in=3 out=3
    [ "$1" = tokens_in_per_frame ] && in=0
    [ "$1" = tokens_out_per_frame ] && out=0
    printf '%s\n%s\n' '{"format":"cadenza-sessions","version":1}' \
        "{\"stream\":{\"start_s\":0,\"frame_period_s\":1,\"duration_s\":4,\"tokens_in_per_frame\":$in,\"tokens_out_per_frame\":$out}}" \
        >"$tmp/zero.jsonl"
    "$cz" trace info "$tmp/zero.jsonl" 2>"$tmp/e" >/dev/null
    [ $? -eq 2 ] && grep -q "zero.jsonl:2" "$tmp/e" && grep -q "$1" "$tmp/e"
}
for f in tokens_in_per_frame tokens_out_per_frame; do
    check "$f 0 in a config exits 2 naming the field" t_zero_config $f
    check "$f 0 in a trace exits 2 naming the file, line and field" t_zero_trace $f
done

# the outcome counts themselves
t_stream_counts() {
    sim experiments/metronome/windowed.json &&
        expect balanced requests=0 streams=96 streams_completed=96 frames=14400 \
            served_frames=14400
}
check "a stream run reports its frames and streams" t_stream_counts
t_cut_turns() {
    sim $sa --set sim.max_time_s=100 && expect balanced requests=400 'unfinished>=300'
}
check "a clock that stops mid-run counts what is open as unfinished" t_cut_turns
t_cut_streams() {
    sim experiments/metronome/windowed.json --set sim.max_time_s=100 &&
        expect balanced streams_unfinished=96 'unfinished_frames>=7000'
}
check "... for streams too" t_cut_streams
t_cut_xstage() {
    sim experiments/nova/vlm.json --set workload.synthetic.requests=80 \
        --set sim.max_time_s=60 && expect balanced requests=80 'unfinished>=1'
}
check "a cross-stage run accounts for every request" t_cut_xstage
t_barged() {
    sim $sa --set workload.synthetic.requests=60 --set workload.barge_in.p=1 &&
        expect balanced requests=60 'aborted>=20' unfinished=0
}
check "barged-in turns are aborted, once each" t_barged

# 5. an offload store that landed after its session closed read the session from a
#    streamed window that had moved past it (an assertion in the default experiment)
t_offload_streamed() {
    sim --set server.kv_idle=offload && expect balanced requests=9754 completed=9753 rejected=1 &&
        cp "$tmp/s.json" "$tmp/streamed.json" &&
        timeout 300 "$cz" sim --set server.kv_idle=offload --whole-workload --quiet \
            --no-progress --summary "$tmp/s.json" && cmp -s "$tmp/s.json" "$tmp/streamed.json"
}
check "offload under a streamed workload (the default experiment), same as whole" \
    t_offload_streamed
t_offload_bros() {
    sim experiments/bros/mix.json --set server.kv_idle=offload &&
        expect balanced requests=4000 completed=4000
}
check "... and BROS's mix" t_offload_bros

# 6. an admission that could not get its KV evicted the landed KV loads of the sequences
#    queued behind it, which loaded again, for ever (the clock ran with no turn ending)
t_load_livelock() {
    sim $mt --set seed=722703 --set scheduler=liveserve --set server.kv_evict=next_use \
        --set 'workload.barge_in={"p":0.3}' --set pipeline.thinker.kv_blocks=256 &&
        expect balanced requests=299 unfinished=0
}
check "failed admissions no longer evict landed KV loads (a livelock)" t_load_livelock

# 7. the engine asserted where the simulator ran: the cross-stage engine reused a request's
#    KV blocks before giving them back; windowed block tables outgrew their reserve; KV
#    copies named blocks behind the window
replay() {
    rm -f "$tmp/s.json"
    timeout 300 "$cz" replay "$@" --threads 1 --quiet --no-progress --summary "$tmp/s.json"
}
t_xs_blocks() {
    replay experiments/engine/nova_cpu.json --set 'scheduler={"name":"nova_chunked_prefill"}' \
        --set server.kv_blocks=16 && expect balanced requests=60 completed=60 &&
        replay experiments/engine/nova_cpu.json --set 'scheduler={"name":"nova_pf_limit"}' \
            --set server.kv_blocks=64 && expect balanced requests=60 completed=60
}
check "the cross-stage engine gives a request's blocks back before reusing them" t_xs_blocks
t_window_table() {
    replay experiments/engine/cpu.json --set workload.max_requests=4 --set server.kv_blocks=256 \
        --set server.block_tokens=1 --set server.max_num_seqs=2 \
        --set server.kv_window_tokens=32 --set workload.time_scale=0.05 &&
        expect balanced requests=4 completed=4
}
check "a windowed sequence's block table grows past its reserve" t_window_table
t_window_offload() {
    replay experiments/engine/cpu.json --set workload.max_requests=3 \
        --set workload.time_scale=0.05 --set server.kv_blocks=128 --set server.kv_idle=offload \
        --set server.kv_window_tokens=128 --set server.kv_sink_tokens=16 &&
        expect balanced requests=3 completed=3
}
check "KV copies of a windowed sequence skip the blocks behind the window" t_window_offload

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

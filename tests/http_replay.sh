#!/usr/bin/env bash
# tests/http_replay.sh CADENZA SOURCE_ROOT - `cadenza replay --endpoint` against `cadenza
# serve` on loopback, in both executions (-o with a row a request and a row a chunk), and against a misbehaving server
# (tests/http_fake_server.py, a stream stalled past --request-timeout among its failures): a
# trace slice completes with the simulator's tokens and the server's own count of them; -o has a row a request with its send time; --max-concurrency
# bounds what is in flight; closed-loop sessions with think time; an API key; a server that
# is not there, and every way a stream can fail, each an outcome counted by its reason;
# Ctrl-C writes a partial run with every request accounted for; usage errors. Prints
# "N passed, N failed".
set -u
cz=$(realpath "$1")
root=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$root" || exit 1
. "$(dirname "$0")/check.sh"
cpu=experiments/engine/cpu.json

start() { serve_start "$@"; }
stop() {
    kill -TERM "$server"
    wait "$server"
}

# sum KEY... of a JSON summary, and one key's value
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$@"; }
export -f jget

# ---- usage ----
check "replay --help names --endpoint" bash -c "'$cz' replay --help | grep -q -- '--endpoint URL'"
check "--model without --endpoint is a usage error" expect_exit 2 "$cz" replay "$cpu" --model x
check "--endpoint with --backend is a usage error" expect_exit 2 "$cz" replay "$cpu" \
    --endpoint http://127.0.0.1:1 --backend cpu
check "--max-concurrency 0 is a usage error" expect_exit 2 "$cz" replay "$cpu" \
    --endpoint http://127.0.0.1:1 --max-concurrency 0
check "a URL that is not http is refused, naming the flag, no output" bash -c "
    '$cz' replay '$cpu' --endpoint ftp://x --summary '$tmp/bad.json' 2>'$tmp/e'; r=\$?
    [ \$r -eq 2 ] && grep -q -- '--endpoint' '$tmp/e' && [ ! -e '$tmp/bad.json' ]"
check "--no-events without --endpoint is a usage error" expect_exit 2 "$cz" replay "$cpu" \
    --no-events
check "periodic streams are refused (exit 2)" expect_exit 2 "$cz" replay \
    experiments/metronome/windowed.json --endpoint http://127.0.0.1:1

# ---- the modelled server ----
slice=(--set workload.max_requests=12 --set workload.time_scale=0.25)
start "$cpu" --summary "$tmp/served.json" || exit 1
check "a trace slice against the modelled server" "$cz" replay "$cpu" "${slice[@]}" \
    --endpoint "http://127.0.0.1:$port" --summary "$tmp/h.json" -o "$tmp/h.h5" --no-progress
"$cz" sim "$cpu" "${slice[@]}" --quiet --summary "$tmp/s.json"
check "every request completed, driver http, tokens as the simulator's" python3 - "$tmp/h.json" "$tmp/s.json" <<'EOF'
import json, sys
h, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert h["driver"] == "http" and h["backend"] == "openai" and h["partial"] is False, h["driver"]
assert h["requests"] == h["completed"] == 12, (h["requests"], h["completed"])
assert h["total_output_tokens"] == s["total_output_tokens"], (h["total_output_tokens"], s["total_output_tokens"])
assert h["total_input_tokens"] == s["total_input_tokens"], (h["total_input_tokens"], s["total_input_tokens"])
assert h["http"]["usage_reported"] == 12 and h["http"]["max_tokens_honoured"] == 12, h["http"]
assert h["http"]["chunks"] == h["total_output_tokens"], h["http"]
for k in ("mean_ttft_ms", "p99_itl_ms", "mean_tpot_ms", "p99_send_lag_ms"):
    assert h[k] is not None and h[k] >= 0, (k, h[k])
assert h["p99_send_lag_ms"] < 50, h["p99_send_lag_ms"]
EOF
h5table=$(dirname "$cz")/../tests/h5table
check "-o: a row a request, with its send time" bash -c "
    [ \"\$('$h5table' '$tmp/h.h5' requests | tail -n +2 | wc -l)\" = 12 ] &&
    '$h5table' '$tmp/h.h5' requests | head -1 | tr '\t' '\n' | grep -qx sent_s"
check "-o: /chunks, a row a chunk received, the first and last at each request's first and last token" python3 - "$h5table" "$tmp/h.h5" "$tmp/h.json" <<'EOF'
import json, subprocess, sys
def table(name):
    rows = subprocess.run([sys.argv[1], sys.argv[2], name], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    head = rows[0].split('\t')
    return [dict(zip(head, x.split('\t'))) for x in rows[1:]]
req, ch = table('requests'), table('chunks')
h = json.load(open(sys.argv[3]))
assert len(ch) == h["http"]["chunks"] == h["total_output_tokens"], (len(ch), h["http"])
by = {}
for c in ch:
    by.setdefault(int(c['request']), []).append((int(c['index']), float(c['t_s'])))
assert sorted(by) == list(range(len(req))), sorted(by)
for i, r in enumerate(req):
    c = sorted(by[i])
    assert [k for k, _ in c] == list(range(len(c))), c[:5]
    t = [x for _, x in c]
    assert t == sorted(t) and len(t) == int(r['output_tokens']), (i, len(t), r['output_tokens'])
    assert abs(t[0] - float(r['first_token_s'])) < 1e-9 and abs(t[-1] - float(r['finish_s'])) < 1e-9
EOF
check "a simulator's results have no /chunks" bash -c "
    '$cz' sim '$cpu' ${slice[*]} -o '$tmp/s.h5' --quiet && ! '$h5table' '$tmp/s.h5' chunks >/dev/null 2>&1"
check "--max-concurrency 1: one request in flight at a time" bash -c "
    '$cz' replay '$cpu' ${slice[*]} --endpoint http://127.0.0.1:$port --max-concurrency 1 \
        --summary '$tmp/c1.json' -o '$tmp/c1.h5' --quiet &&
    python3 - '$h5table' '$tmp/c1.h5' <<'EOF'
import subprocess, sys
rows = subprocess.run([sys.argv[1], sys.argv[2], 'requests'], capture_output=True, text=True).stdout.splitlines()
head = rows[0].split('\t')
r = sorted((dict(zip(head, x.split('\t'))) for x in rows[1:]), key=lambda x: float(x['sent_s']))
assert len(r) == 12
for a, b in zip(r, r[1:]):
    assert float(b['sent_s']) >= float(a['finish_s']), (a['sent_s'], a['finish_s'], b['sent_s'])
assert any(float(x['sent_s']) - float(x['arrival_s']) > 0.01 for x in r), 'no request waited'
EOF"
# closed-loop sessions: each next turn after the reply and its think time, carrying the
# conversation (the server's reply ids), a session id each
cat >"$tmp/sessions.jsonl" <<'EOF'
{"format":"cadenza-sessions","version":1,"source":"test","concurrency":0,"hash_block_tokens":0,"arrivals_given":true,"think_given":true}
{"session":"alice","class":"rt","timing":"closed","turns":[{"arrival_s":0,"in_text_tokens":20,"out_text_tokens":5,"think_s":0.3},{"arrival_s":0,"in_text_tokens":10,"out_text_tokens":4,"think_s":0.2},{"arrival_s":0,"in_text_tokens":8,"out_text_tokens":3}]}
{"session":"bob","class":"rt","timing":"closed","turns":[{"arrival_s":0.1,"in_text_tokens":30,"out_text_tokens":6,"think_s":0.1},{"arrival_s":0,"in_text_tokens":12,"out_text_tokens":2}]}
EOF
cat >"$tmp/sessions.json" <<EOF
{"model": "tiny-llama", "hardware": "cpu-host", "workload": {"trace": {"path": "$tmp/sessions.jsonl"}}}
EOF
check "closed-loop sessions: every turn, think time kept" bash -c "
    '$cz' replay '$tmp/sessions.json' --endpoint http://127.0.0.1:$port -o '$tmp/ses.h5' \
        --summary '$tmp/ses.json' --quiet &&
    python3 - '$h5table' '$tmp/ses.h5' '$tmp/ses.json' <<'EOF'
import json, subprocess, sys
s = json.load(open(sys.argv[3]))
assert s['completed'] == 5 and s['total_output_tokens'] == 20, (s['completed'], s['total_output_tokens'])
rows = subprocess.run([sys.argv[1], sys.argv[2], 'requests'], capture_output=True, text=True).stdout.splitlines()
head = rows[0].split('\t')
r = [dict(zip(head, x.split('\t'))) for x in rows[1:]]
by = {(int(x['session']), int(x['turn'])): x for x in r}
think = {(0, 0): 0.3, (0, 1): 0.2, (1, 0): 0.1}
for (si, t), th in think.items():
    gap = float(by[(si, t + 1)]['sent_s']) - float(by[(si, t)]['finish_s'])
    assert th - 0.005 <= gap <= th + 0.25, (si, t, gap, th)
# the conversation carried: each prompt the earlier prompts and replies, then its own input
own = {(0, 0): 20, (0, 1): 10, (0, 2): 8, (1, 0): 30, (1, 1): 12}
for (si, t), n in own.items():
    want = n + sum(own[(si, k)] + int(by[(si, k)]['output_tokens']) for k in range(t))
    assert int(by[(si, t)]['input_tokens']) == want, (si, t, by[(si, t)]['input_tokens'], want)
h = s['http']
assert h['replies_carried_as_ids'] == 3 and h['replies_carried_as_count'] == 0, h
EOF"
stop
check "the server served exactly what the client received" python3 - "$tmp/served.json" "$tmp/h.json" "$tmp/c1.json" "$tmp/ses.json" <<'EOF'
import json, sys
served = json.load(open(sys.argv[1]))
runs = [json.load(open(p)) for p in sys.argv[2:]]
assert served["completed"] == sum(r["completed"] for r in runs), (served["completed"], [r["completed"] for r in runs])
assert served["total_output_tokens"] == sum(r["total_output_tokens"] for r in runs)
EOF

# ---- the chat API: text of the trace's token counts under the server's tokenizer ----
mkdir -p "$tmp/tok"
cp tests/fuzz/corpus/tokenizer/llama3 "$tmp/tok/tokenizer.json"
check "--api chat without --tokenizer is a usage error" expect_exit 2 "$cz" replay "$cpu" \
    --endpoint http://127.0.0.1:1 --api chat
check "--tokenizer without --api chat is a usage error" expect_exit 2 "$cz" replay "$cpu" \
    --endpoint http://127.0.0.1:1 --tokenizer "$tmp/tok"
check "a folder with no tokenizer.json: exit 2 naming --tokenizer" bash -c "
    '$cz' replay '$cpu' --endpoint http://127.0.0.1:1 --api chat --tokenizer '$tmp' 2>'$tmp/e'
    [ \$? -eq 2 ] && grep -q -- '--tokenizer' '$tmp/e'"
start "$cpu" --model-dir "$tmp/tok" || exit 1
check "a trace slice as chat messages" "$cz" replay "$cpu" "${slice[@]}" --api chat \
    --tokenizer "$tmp/tok" --endpoint "http://127.0.0.1:$port" --summary "$tmp/ch.json" \
    -o "$tmp/ch.h5" --quiet
check "... each message the trace's count under the tokenizer, the template's tokens on top" \
    python3 - "$h5table" "$tmp/ch.h5" "$tmp/s.h5" "$tmp/ch.json" <<'EOF'
import json, subprocess, sys
def table(path, name):
    rows = subprocess.run([sys.argv[1], path, name], capture_output=True, text=True, check=True).stdout.splitlines()
    head = rows[0].split('\t')
    return [dict(zip(head, x.split('\t'))) for x in rows[1:]]
s = json.load(open(sys.argv[4]))
assert s['completed'] == 12 and s['http']['api'] == 'chat', (s['completed'], s['http'])
assert s['http']['prompt_len_missed'] == 0 and s['http']['max_tokens_honoured'] == 12, s['http']
h = {(r['session'], r['turn']): int(r['input_tokens']) for r in table(sys.argv[2], 'requests')}
m = {(r['session'], r['turn']): int(r['input_tokens']) for r in table(sys.argv[3], 'requests')}
over = {h[k] - m[k] for k in m}
assert len(over) == 1 and over.pop() > 0, sorted(h[k] - m[k] for k in m)
EOF
check "closed-loop sessions as a chat: the conversation carried as text" bash -c "
    '$cz' replay '$tmp/sessions.json' --api chat --tokenizer '$tmp/tok' \
        --endpoint http://127.0.0.1:$port --summary '$tmp/chs.json' -o '$tmp/chs.h5' --quiet &&
    python3 - '$h5table' '$tmp/chs.h5' '$tmp/chs.json' <<'EOF'
import json, subprocess, sys
s = json.load(open(sys.argv[3]))
assert s['completed'] == 5 and s['http']['replies_carried_as_text'] == 3, s['http']
rows = subprocess.run([sys.argv[1], sys.argv[2], 'requests'], capture_output=True, text=True).stdout.splitlines()
head = rows[0].split('\t')
r = {(int(x['session']), int(x['turn'])): x for x in (dict(zip(head, y.split('\t'))) for y in rows[1:])}
own = {(0, 0): 20, (0, 1): 10, (0, 2): 8, (1, 0): 30, (1, 1): 12}
for (si, t), n in own.items():
    if t:
        prev = r[(si, t - 1)]
        # the earlier messages (with their template tokens) come before the turn's own
        assert int(r[(si, t)]['input_tokens']) > int(prev['input_tokens']) + int(prev['output_tokens']) + n - 1, (si, t)
EOF"
stop

# ---- spoken sessions: playback, barge-in, the interaction plane ----
voice=experiments/engine/voice_sessions.json
"$cz" sim "$voice" --quiet --summary "$tmp/vs.json" -o "$tmp/vs.h5"
cp tests/http_spoken_check.py "$tmp/spoken_check.py"
start "$voice" || exit 1
check "a multi-turn spoken workload with barge-in against the modelled server" "$cz" replay \
    "$voice" --endpoint "http://127.0.0.1:$port" --summary "$tmp/vh.json" -o "$tmp/vh.h5" --quiet
curl -s "http://127.0.0.1:$port/metrics" >"$tmp/vm.txt"
check "... outcomes add up, cuts at the playback position (10 ms), heard context carried, the server told" \
    python3 "$tmp/spoken_check.py" "$h5table" "$tmp/vs.h5" "$tmp/vs.json" "$tmp/vh.h5" \
    "$tmp/vh.json" "$tmp/vm.txt"
# a barge-in while the reply still streams: the stream is cancelled there
cat >"$tmp/cut.jsonl" <<'EOF'
{"format":"cadenza-sessions","version":1,"source":"test","concurrency":0,"hash_block_tokens":0,"arrivals_given":true,"think_given":true}
{"session":"carol","class":"rt","timing":"closed","turns":[{"arrival_s":0,"speech_s":0.1,"in_text_tokens":16,"out_text_tokens":300,"out_audio_tokens":300,"out_audio_s":3,"think_s":0.1,"barge_in_s":0.15},{"arrival_s":0,"speech_s":0.2,"in_text_tokens":8,"out_text_tokens":4,"out_audio_tokens":4,"out_audio_s":0.4}]}
EOF
cat >"$tmp/cut.json" <<EOF
{"model": "tiny-llama", "hardware": "cpu-host", "workload": {"trace": {"path": "$tmp/cut.jsonl"}}}
EOF
check "a barge-in mid-stream cancels the stream at the player's position" bash -c "
    '$cz' replay '$tmp/cut.json' --endpoint http://127.0.0.1:$port --summary '$tmp/cut_s.json' \
        -o '$tmp/cut.h5' --quiet &&
    python3 - '$h5table' '$tmp/cut.h5' '$tmp/cut_s.json' <<'EOF'
import json, subprocess, sys
def table(name):
    rows = subprocess.run([sys.argv[1], sys.argv[2], name], capture_output=True, text=True, check=True).stdout.splitlines()
    head = rows[0].split('\t')
    return [dict(zip(head, x.split('\t'))) for x in rows[1:]]
s = json.load(open(sys.argv[3]))
assert s['completed'] == 1 and s['aborted'] == 1, (s['completed'], s['aborted'])
assert s['http']['barge_ins_streaming'] == 1, s['http']
a = {r['turn']: r for r in table('audio')}
r = {r['turn']: r for r in table('requests')}
cut = float(a['0']['end_s']) - float(a['0']['first_audio_s'])
assert abs(cut - 0.15) <= 0.010, cut
assert int(r['0']['output_tokens']) < 300 and int(r['0']['heard_tokens']) == 15, r['0']
# the next turn: sent its speech (0.2 s) after the cut, its prompt the heard context
assert 0.2 <= float(r['1']['sent_s']) - float(a['0']['end_s']) <= 0.25, (r['1']['sent_s'], a['0']['end_s'])
assert int(r['1']['input_tokens']) == 16 + 15 + 8, r['1']['input_tokens']
EOF"
check "--no-events: the same run, the server told nothing" bash -c "
    before=\$(curl -s http://127.0.0.1:$port/metrics | grep '^cadenza:session_events_total' | md5sum)
    '$cz' replay '$tmp/cut.json' --endpoint http://127.0.0.1:$port --no-events \
        --summary '$tmp/ne.json' --quiet &&
    [ \"\$(jget '$tmp/ne.json' 'http[\"events\"][\"sent\"]')\" = 0 ] &&
    [ \"\$(jget '$tmp/ne.json' aborted)\" = 1 ] &&
    [ \"\$(curl -s http://127.0.0.1:$port/metrics | grep '^cadenza:session_events_total' | md5sum)\" = \"\$before\" ]"
stop

# ---- the engine behind the server ----
start "$cpu" --execution engine || exit 1
check "a trace slice against the engine" "$cz" replay "$cpu" --set workload.max_requests=6 \
    --set workload.time_scale=0.25 --endpoint "http://127.0.0.1:$port" --summary "$tmp/e.json" \
    --no-progress
check "... every request completed with its tokens" bash -c "
    [ \"\$(jget '$tmp/e.json' completed)\" = 6 ] &&
    [ \"\$(jget '$tmp/e.json' 'http[\"max_tokens_honoured\"]')\" = 6 ]"
stop
start "$voice" --execution engine || exit 1
check "the spoken workload against the engine" "$cz" replay "$voice" \
    --endpoint "http://127.0.0.1:$port" --summary "$tmp/ve.json" -o "$tmp/ve.h5" --quiet
curl -s "http://127.0.0.1:$port/metrics" >"$tmp/vem.txt"
check "... outcomes add up, cuts at the playback position, heard context carried" \
    python3 "$tmp/spoken_check.py" "$h5table" "$tmp/vs.h5" "$tmp/vs.json" "$tmp/ve.h5" \
    "$tmp/ve.json" "$tmp/vem.txt"
stop

# ---- an API key ----
start "$cpu" --api-key sesame || exit 1
check "a missing key: every turn failed with HTTP 401, counted" bash -c "
    '$cz' replay '$cpu' --set workload.max_requests=3 --endpoint http://127.0.0.1:$port \
        --summary '$tmp/k0.json' --quiet &&
    [ \"\$(jget '$tmp/k0.json' failed)\" = 3 ] &&
    [ \"\$(jget '$tmp/k0.json' 'http[\"failed_by\"][\"http_status\"]')\" = 3 ] &&
    [ \"\$(jget '$tmp/k0.json' 'http[\"first_error\"][\"http_status\"]')\" = 'HTTP 401: Unauthorized' ]"
check "the key, from the environment" bash -c "
    OPENAI_API_KEY=sesame '$cz' replay '$cpu' --set workload.max_requests=3 \
        --set workload.time_scale=0.25 --endpoint http://127.0.0.1:$port/v1 \
        --summary '$tmp/k1.json' --quiet && [ \"\$(jget '$tmp/k1.json' completed)\" = 3 ]"
stop

# ---- no server, and a misbehaving one ----
check "no server: every turn failed (transport), the run completes" bash -c "
    '$cz' replay '$cpu' --set workload.max_requests=4 --set workload.time_scale=0.1 \
        --endpoint http://127.0.0.1:9 --summary '$tmp/n.json' --quiet 2>/dev/null &&
    [ \"\$(jget '$tmp/n.json' failed)\" = 4 ] &&
    [ \"\$(jget '$tmp/n.json' 'http[\"failed_by\"][\"transport\"]')\" = 4 ]"
python3 tests/http_fake_server.py "$tmp/fake.port" >"$tmp/fake.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$tmp/fake.port" ] && break; sleep 0.05; done
fport=$(cat "$tmp/fake.port")
check "a misbehaving server (one stalls past --request-timeout): each failure an outcome with its reason" bash -c "
    '$cz' replay '$cpu' --set workload.max_requests=8 --set workload.time_scale=0.01 \
        --endpoint http://127.0.0.1:$fport --max-concurrency 1 --request-timeout 1 \
        --summary '$tmp/f.json' --quiet 2>'$tmp/f.err' &&
    python3 - '$tmp/f.json' <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
f = s['http']['failed_by']
want = {'http_status': 1, 'error_event': 1, 'truncated': 1, 'bad_chunk': 1, 'no_chunk': 1,
        'transport': 2}
assert {k: v for k, v in f.items() if v} == want, f
assert s['completed'] == 1 and s['failed'] == 7, (s['completed'], s['failed'])
assert s['requests'] == 8
EOF"

check "a server that takes no events: the first answered 404, none sent after, every turn played" bash -c "
    '$cz' replay '$voice' --endpoint http://127.0.0.1:$fport --summary '$tmp/fe.json' --quiet &&
    python3 - '$tmp/fe.json' <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
e = s['http']['events']
assert e['unsupported'] is True and e['ok'] == 0 and e['failed'] == 0, e
assert 1 <= e['sent'] <= 8, e  # one a session at most before the first answer
assert s['completed'] + s['aborted'] == 24 and s['spoken_turns'] == 24, s
EOF"

# ---- Ctrl-C ----
start "$cpu" || exit 1
timeout -s INT 3 "$cz" replay "$cpu" --endpoint "http://127.0.0.1:$port" \
    --summary "$tmp/p.json" --no-progress >"$tmp/p.out" 2>&1
check "Ctrl-C writes a partial run, every request accounted for" python3 - "$tmp/p.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["partial"] is True
assert s["requests"] == 40 and s["unfinished"] > 0, (s["requests"], s["unfinished"])
assert sum(s[k] for k in ("completed", "aborted", "rejected", "failed", "unfinished")) == 40
EOF
stop

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

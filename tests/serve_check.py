#!/usr/bin/env python3
"""serve_check.py PORT CHECK [ARGS...] - HTTP checks of `cadenza serve` with Python's
standard library only (http.client, json, threading): each CHECK exits 0 when it holds and
prints what went wrong otherwise. tests/serve.sh runs them against a server it started on
loopback."""
import http.client
import json
import re
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])


def request(method, path, body=None, headers=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    data = None
    if body is not None:
        data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    return r.status, r.getheader("Content-Type") or "", raw


def stream(path, body, headers=None, stop_after=None, timeout=120):
    """POSTs a streamed request; returns (status, events) where events are the parsed
    `data:` payloads ([DONE] kept as the string). stop_after: close the socket after that
    many events (a client going away)."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body=json.dumps(body).encode(), headers=h)
    r = c.getresponse()
    events = []
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            line = ev.decode()
            if not line.startswith("data: "):
                raise AssertionError("not an SSE data event: %r" % line)
            payload = line[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
            if stop_after is not None and len(events) >= stop_after:
                c.sock.shutdown(socket.SHUT_RDWR)
                c.close()
                return r.status, events
    c.close()
    return r.status, events


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def check_error(status, raw, want_status, want_param=None, words=None):
    expect(status == want_status, "status %d, expected %d: %r" % (status, want_status, raw[:300]))
    body = json.loads(raw)
    err = body.get("error")
    expect(isinstance(err, dict), "no error object: %r" % body)
    for k in ("message", "type", "param", "code"):
        expect(k in err, "error object without %s: %r" % (k, err))
    expect(err["code"] == want_status, "error code %r" % err["code"])
    if want_param is not None:
        expect(err["param"] == want_param, "param %r, expected %r" % (err["param"], want_param))
    for w in words or []:
        expect(w in err["message"], "message %r lacks %r" % (err["message"], w))


def c_plain():
    s, t, raw = request("POST", "/v1/completions", {"prompt": "Hello there", "max_tokens": 7})
    expect(s == 200 and t.startswith("application/json"), "status %d %s" % (s, t))
    d = json.loads(raw)
    expect(d["object"] == "text_completion", d)
    expect(d["id"].startswith("cmpl-") and len(d["id"]) == 37, d["id"])
    ch = d["choices"]
    expect(len(ch) == 1 and ch[0]["finish_reason"] == "length", ch)
    u = d["usage"]
    expect(u["completion_tokens"] == 7 and u["prompt_tokens"] == len("Hello there"), u)
    expect(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u)
    expect(len(ch[0]["text"]) == 7, "a byte-level reply of 7 tokens: %r" % ch[0]["text"])
    # token ids as the prompt, and two prompts in one request
    s, _, raw = request("POST", "/v1/completions", {"prompt": [[1, 2, 3], [4, 5]], "max_tokens": 3})
    d = json.loads(raw)
    expect(s == 200 and [c["index"] for c in d["choices"]] == [0, 1], d)
    expect(d["usage"]["prompt_tokens"] == 5 and d["usage"]["completion_tokens"] == 6, d["usage"])


def c_stream():
    s, ev = stream("/v1/completions", {"prompt": "Hi", "max_tokens": 5, "stream": True,
                                       "stream_options": {"include_usage": True}})
    expect(s == 200, s)
    expect(ev[-1] == "[DONE]", "no [DONE]: %r" % ev[-1:])
    chunks = ev[:-2]
    expect(len(chunks) == 5, "one chunk a token: %d" % len(chunks))
    expect(all(c["object"] == "text_completion" for c in chunks), chunks[0])
    expect([c["choices"][0]["finish_reason"] for c in chunks] == [None] * 4 + ["length"],
           [c["choices"][0]["finish_reason"] for c in chunks])
    u = ev[-2]
    expect(u["choices"] == [] and u["usage"]["completion_tokens"] == 5, u)
    expect(len({c["id"] for c in chunks + [u]}) == 1, "one id a response")


def c_chat():
    body = {"messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Hello"}], "max_tokens": 4}
    s, _, raw = request("POST", "/v1/chat/completions", body)
    d = json.loads(raw)
    expect(s == 200 and d["object"] == "chat.completion", d)
    m = d["choices"][0]["message"]
    expect(m["role"] == "assistant" and len(m["content"]) == 4, m)
    expect(d["usage"]["completion_tokens"] == 4, d["usage"])
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    s, ev = stream("/v1/chat/completions", body)
    expect(ev[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, ev[0])
    expect(ev[-1] == "[DONE]" and ev[-2]["usage"]["completion_tokens"] == 4, ev[-2:])
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in ev[1:-2])
    expect(len(text) == 4 and ev[-3]["choices"][0]["finish_reason"] == "length", ev[-3])


def c_errors():
    s, _, raw = request("POST", "/v1/completions", b"{not json")
    check_error(s, raw, 400)
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "n": 2})
    check_error(s, raw, 400, "n")
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "max_tokens": "ten"})
    check_error(s, raw, 400, "max_tokens")
    s, _, raw = request("POST", "/v1/chat/completions", {"messages": [{"role": "tool", "content": "x"}]})
    check_error(s, raw, 400)
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "model": "nope"})
    check_error(s, raw, 404, "model", ["nope"])
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x" * 100, "max_tokens": 10 ** 9})
    check_error(s, raw, 400, None, ["maximum context length"])
    s, _, raw = request("POST", "/v1/completions", b"x" * (33 << 20))
    check_error(s, raw, 413)
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "stop": ["\n"],
                                                    "include_stop_str_in_output": True})
    check_error(s, raw, 400, "include_stop_str_in_output")
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "stop": [""]})
    check_error(s, raw, 400, "stop[0]", ["empty"])
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "stop": None, "max_tokens": 1})
    expect(s == 200, raw)
    s, _, raw = request("GET", "/v1/nothing")
    expect(s == 404 and json.loads(raw) == {"detail": "Not Found"}, (s, raw))
    s, _, raw = request("GET", "/v1/completions")
    expect(s == 405, s)
    # the server is still up and right
    c_plain()


def c_auth_events(key):
    st, _, raw = request("POST", "/v1/sessions/k/events", {"type": "speech_end"})
    expect(st == 401, (st, raw[:200]))
    st, _, raw = request("POST", "/v1/sessions/k/events", {"type": "speech_end"},
                         {"Authorization": "Bearer " + key})
    expect(st == 200, (st, raw[:200]))


def c_auth(key):
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})
    expect(s == 401 and json.loads(raw) == {"error": "Unauthorized"}, (s, raw))
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1},
                        {"Authorization": "Bearer wrong"})
    expect(s == 401, s)
    s, _, raw = request("GET", "/v1/models", None, {"Authorization": "Bearer " + key})
    expect(s == 200 and json.loads(raw)["data"][0]["object"] == "model", (s, raw))
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1},
                        {"Authorization": "Bearer " + key})
    expect(s == 200, s)
    s, _, _ = request("GET", "/health")
    expect(s == 200, "health needs no key")


def c_sessions():
    base = "The quick brown fox jumps over the lazy dog. " * 4
    cached = []
    for i in range(3):
        s, _, raw = request("POST", "/v1/completions",
                            {"prompt": base + "turn %d" % i, "max_tokens": 3},
                            {"X-Session-ID": "conv-1"})
        d = json.loads(raw)
        expect(s == 200, raw)
        det = d["usage"].get("prompt_tokens_details")
        cached.append(det["cached_tokens"] if det else 0)
    expect(cached[0] == 0 and cached[1] == len(base) + 5 and cached[2] == len(base) + 5,
           "cached tokens %r (the prompts share %d)" % (cached, len(base) + 5))
    # the body's user is a session too; another session shares nothing
    s, _, raw = request("POST", "/v1/completions", {"prompt": base + "x", "max_tokens": 2,
                                                    "user": "conv-2"})
    d = json.loads(raw)
    expect(not d["usage"].get("prompt_tokens_details"), d["usage"])


def c_disconnect():
    before = metrics()
    s, ev = stream("/v1/completions", {"prompt": "go", "max_tokens": 3000, "stream": True},
                   stop_after=3)
    expect(len(ev) == 3, ev)
    for _ in range(100):
        time.sleep(0.1)
        m = metrics()
        if m.get("cadenza:client_aborts_total", 0) > before.get("cadenza:client_aborts_total", 0):
            break
    else:
        fail("the request of a client that went away was not aborted")
    expect(m.get('vllm:request_success_total{finished_reason="abort"}', 0) >
           before.get('vllm:request_success_total{finished_reason="abort"}', 0), m)


def metrics():
    s, t, raw = request("GET", "/metrics")
    expect(s == 200 and t.startswith("text/plain"), (s, t))
    out = {}
    types = {}
    for line in raw.decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        key, val = line.rsplit(" ", 1)
        name = key.split("{")[0]
        base = name
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and name[: -len(suf)] in types:
                base = name[: -len(suf)]
        expect(base in types, "sample %s before its TYPE line" % name)
        labels = re.sub(r',?model_name="[^"]*"', "", key[len(name):]).replace("{,", "{")
        labels = "" if labels == "{}" else labels
        out[name + labels] = float(val)
    return out


def c_metrics():
    m = metrics()
    for k in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
              "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
              "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds_count",
              "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_count",
              "cadenza:kv_host_tokens", "cadenza:client_aborts_total"):
        expect(k in m, "no %s in /metrics" % k)
    expect(m["vllm:generation_tokens_total"] > 0 and m["vllm:prompt_tokens_total"] > 0, m)
    expect(m['vllm:time_to_first_token_seconds_bucket{le="+Inf"}'] ==
           m["vllm:time_to_first_token_seconds_count"], "the +Inf bucket holds every sample")
    expect(0 <= m["vllm:kv_cache_usage_perc"] <= 1, m["vllm:kv_cache_usage_perc"])


def c_concurrent(n, tokens):
    results = [None] * n
    errors = []

    def one(i):
        try:
            s, ev = stream("/v1/completions", {"prompt": "client %d" % i, "max_tokens": tokens,
                                               "stream": True})
            results[i] = (s, ev)
        except Exception as e:  # noqa: BLE001
            errors.append("stream %d: %r" % (i, e))

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    expect(not errors, errors[:3])
    for i, (s, ev) in enumerate(results):
        expect(s == 200 and ev[-1] == "[DONE]", "stream %d: %s %r" % (i, s, ev[-1:]))
        toks = ev[:-1]
        expect(len(toks) == tokens and toks[-1]["choices"][0]["finish_reason"] == "length",
               "stream %d: %d chunks" % (i, len(toks)))


def c_held(n, seconds):
    """Opens n long streams and reports once each has its first chunk; keeps reading until
    the server ends them (SIGTERM from the shell meanwhile); each must end aborted."""
    results = [None] * n
    started = threading.Semaphore(0)

    def one(i):
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
        c.request("POST", "/v1/completions",
                  body=json.dumps({"prompt": "long %d" % i, "max_tokens": 8000,
                                   "stream": True}).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = b""
        first = True
        while True:
            chunk = r.read1(65536)
            if first and chunk:
                started.release()
                first = False
            if not chunk:
                break
            data += chunk
        results[i] = data.decode()

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for _ in range(n):
        expect(started.acquire(timeout=60), "a stream did not start")
    print("started", flush=True)
    for t in ts:
        t.join(timeout=seconds)
    for i, text in enumerate(results):
        expect(text is not None, "stream %d did not end" % i)
        events = [e[len("data: "):] for e in text.split("\n\n") if e]
        expect(events[-1] == "[DONE]", "stream %d: no [DONE]" % i)
        last = json.loads(events[-2])
        expect(last["choices"][0]["finish_reason"] == "abort", "stream %d: %r" % (i, last))


def c_timed(path_out, n, seed):
    """Sends n requests of token-id prompts at spread times from several threads and waits
    for them all; writes nothing (the server's results file is compared with the
    simulator's)."""
    import random

    rng = random.Random(seed)
    plan = [(rng.uniform(0, 3.0), rng.randint(20, 600), rng.randint(1, 80)) for _ in range(n)]
    t0 = time.time()
    errs = []

    def one(at, plen, out):
        time.sleep(max(0.0, at - (time.time() - t0)))
        s, _, raw = request("POST", "/v1/completions",
                            {"prompt": [rng_id % 1000 for rng_id in range(plen)],
                             "max_tokens": out})
        if s != 200:
            errs.append(raw)

    ts = [threading.Thread(target=one, args=p) for p in plan]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    expect(not errs, errs[:2])
    with open(path_out, "w") as f:
        f.write("%d\n" % n)


def ids_of(body, headers=None):
    """A plain completion with return_token_ids: (output ids, finish, stop_reason, usage)."""
    b = dict(body)
    b["return_token_ids"] = True
    s, _, raw = request("POST", "/v1/completions", b, headers)
    expect(s == 200, raw[:300])
    d = json.loads(raw)
    ch = d["choices"][0]
    expect(ch["prompt_token_ids"] is not None and len(ch["token_ids"]) ==
           d["usage"]["completion_tokens"], ch)
    return ch["token_ids"], ch["finish_reason"], ch["stop_reason"], d["usage"]


def c_stop():
    """Stop strings: the reply ends where a stop string first completes, its text cut
    before it (finish_reason stop, stop_reason the string), the streamed text the same
    with no part of the stop string ever sent; the earliest stop wins; min_tokens first."""
    body = {"prompt": [(7 * i + 3) % 200 + 32 for i in range(24)], "max_tokens": 400,
            "seed": 99, "temperature": 0}
    s, _, raw = request("POST", "/v1/completions", body)
    full = json.loads(raw)["choices"][0]["text"]
    # stop strings from the reply's text: two printable characters past its first third
    # (one where the text is sparse: a tokenizer with ids that decode to no text)
    def ok(t):
        return t.isprintable() and "\ufffd" not in t
    for w in (2, 1):
        picks = [k for k in range(len(full) // 3, len(full) - w + 1) if ok(full[k:k + w])]
        if len(picks) >= 2 and full[picks[0]:picks[0] + w] != full[picks[-1]:picks[-1] + w]:
            break
    expect(len(picks) >= 2, "a reply with text to stop on: %r" % full)
    late, early = full[picks[-1]:picks[-1] + w], full[picks[0]:picks[0] + w]
    for stop in ([late], [late, early], ["NEVER@STOP", early], [late[0]], [early[-1], late]):
        want_at = min(full.find(x) for x in stop if x in full)
        want_str = min((x for x in stop if x in full), key=lambda x: (full.find(x) + len(x),
                                                                       stop.index(x)))
        s, _, raw = request("POST", "/v1/completions", dict(body, stop=stop))
        ch = json.loads(raw)["choices"][0]
        expect(ch["text"] == full[:want_at] and ch["finish_reason"] == "stop" and
               ch["stop_reason"] == want_str, (stop, ch, full))
        st, ev = stream("/v1/completions", dict(body, stop=stop, stream=True))
        got = "".join(e["choices"][0]["text"] for e in ev[:-1])
        expect(got == ch["text"] and ev[-2]["choices"][0]["stop_reason"] == want_str,
               (stop, got, ch["text"]))
    # a stop string the reply never holds: it runs to max_tokens
    s, _, raw = request("POST", "/v1/completions", dict(body, stop=["NEVER@STOP"]))
    ch = json.loads(raw)["choices"][0]
    expect(ch["text"] == full and ch["finish_reason"] == "length", ch)


def c_seed():
    """A request's seed: the same seed gives the same reply, alone or batched with others;
    another seed another reply."""
    body = {"prompt": [(13 * i + 2) % 200 + 32 for i in range(30)], "max_tokens": 12,
            "temperature": 1.0, "seed": 1234}
    alone, _, _, _ = ids_of(body)
    out = [None] * 4

    def one(i):
        b = dict(body) if i == 0 else {"prompt": [i + 40] * (10 + i), "max_tokens": 30,
                                       "temperature": 1.0}
        out[i] = ids_of(b)[0]

    ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    other, _, _, _ = ids_of(dict(body, seed=4321))
    expect(out[0] == alone, "seed 1234 batched %r, alone %r" % (out[0], alone))
    expect(other != alone, "seeds 1234 and 4321 gave the same reply %r" % alone)


def c_engine(vocab):
    """The engine's execution: greedy ids repeat; stop ids, min_tokens and the stream's
    finish; a session's kept KV gives what a cold prompt gives."""
    prompt = [(7 * i + 3) % vocab for i in range(40)]
    a, fin, _, u = ids_of({"prompt": prompt, "max_tokens": 8})
    expect(fin == "length" and len(a) == 8, (fin, a))
    expect(all(0 <= x < vocab for x in a), a)
    b, _, _, _ = ids_of({"prompt": prompt, "max_tokens": 8})
    expect(a == b, "greedy replies differ: %r %r" % (a, b))
    # every id a stop id: the reply ends at min_tokens, on the id sampled there
    out, fin, why, u = ids_of({"prompt": prompt, "max_tokens": 8, "min_tokens": 3,
                               "stop_token_ids": list(range(vocab))})
    expect(out == a[:3] and fin == "stop" and why == a[2] and u["completion_tokens"] == 3,
           (out, fin, why, u))
    # one stop id: the reply ends at its first place (at or after min_tokens)
    x = a[2]
    first = a.index(x) + 1
    out, fin, why, _ = ids_of({"prompt": prompt, "max_tokens": 8, "stop_token_ids": [x]})
    expect(out == a[:first] and fin == "stop" and why == x, (out, fin, why, a))
    later = [k for k in range(1, 8) if a[k] == a[0]]
    out, fin, why, _ = ids_of({"prompt": prompt, "max_tokens": 8, "min_tokens": 2,
                               "stop_token_ids": [a[0]]})
    want = a[:later[0] + 1] if later else a
    expect(out == want and fin == ("stop" if later else "length"), (out, fin, a))
    # streamed: one id a chunk, the stop on the last
    s, ev = stream("/v1/completions", {"prompt": prompt, "max_tokens": 8, "stream": True,
                                       "return_token_ids": True, "stop_token_ids": [x],
                                       "stream_options": {"include_usage": True}})
    got = [i for e in ev[:-2] for i in e["choices"][0]["token_ids"]]
    last = [e for e in ev[:-2] if e["choices"][0]["finish_reason"]]
    expect(got == a[:first] and len(last) == 1 and last[0]["choices"][0]["finish_reason"] ==
           "stop" and last[0]["choices"][0]["stop_reason"] == x, ev)
    expect(ev[-2]["usage"]["completion_tokens"] == first, ev[-2])
    # a request's own sampling: temperature 0, or top_k 1, is the greedy reply
    g0, _, _, _ = ids_of({"prompt": prompt, "max_tokens": 8, "temperature": 0})
    k1, _, _, _ = ids_of({"prompt": prompt, "max_tokens": 8, "temperature": 1.5, "top_k": 1})
    expect(g0 == a and k1 == a, "greedy %r, temperature 0 %r, top_k 1 %r" % (a, g0, k1))
    c_seed()
    # a session: its next prompt extends the last prompt and reply, or shares the prompt
    # only; the kept KV serves the shared prefix and the reply is what a cold prompt gets
    h = {"X-Session-ID": "engine-1"}
    r1, _, _, u1 = ids_of({"prompt": prompt, "max_tokens": 6}, h)
    expect(r1 == a[:6], (r1, a))
    ctx = prompt + r1
    for extend in (True, False, True):
        # extend: the last prompt and reply, and more; else the last prompt's first 30 ids
        nxt = ctx + [11, 12, 13, 14] if extend else ctx[:30] + [21, 22, 23]
        warm, _, _, uw = ids_of({"prompt": nxt, "max_tokens": 6}, h)
        cold, _, _, uc = ids_of({"prompt": nxt, "max_tokens": 6})
        det = uw.get("prompt_tokens_details") or {}
        shared = len(ctx) - 1 if extend else 30  # the reply's last id has no KV yet
        expect(det.get("cached_tokens") == shared, (extend, det, shared))
        expect(not uc.get("prompt_tokens_details"), uc)
        expect(warm == cold, "a session's reply %r, cold %r" % (warm, cold))
        ctx = nxt + warm


def event(session, body, headers=None):
    s, _, raw = request("POST", "/v1/sessions/%s/events" % session, body, headers)
    return s, json.loads(raw)


def model_len():
    s, _, raw = request("GET", "/v1/models")
    return json.loads(raw)["data"][0]["max_model_len"]


def c_events(engine=False):
    """The interaction plane: a barge-in cuts a streamed reply where the user stopped
    hearing it (the stream ends "abort", the session keeps the heard tokens' KV); a barge-in
    after the reply ended cuts the kept context back; playback after an end of speech is
    the audio TTFP; bad events are refused naming the field."""
    before = metrics()
    prompt = [(5 * i + 1) % 200 + 32 for i in range(60)]
    n = min(2000, model_len() - len(prompt) - 50)
    # a barge-in while the reply streams: the user heard its first 4 tokens
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    c.request("POST", "/v1/completions", body=json.dumps({
        "prompt": prompt, "max_tokens": n, "stream": True, "return_token_ids": True}).encode(),
        headers={"Content-Type": "application/json", "X-Session-ID": "ev-1"})
    r = c.getresponse()
    evs, buf, answer = [], b"", None
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            e, buf = buf.split(b"\n\n", 1)
            p = e.decode()[len("data: "):]
            evs.append(p if p == "[DONE]" else json.loads(p))
        if answer is None and len(evs) >= 6:
            st, answer = event("ev-1", {"type": "playback", "played_s": 0.5, "received_s": 1.0})
            expect(st == 200 and answer["applied"], answer)
            st, answer = event("ev-1", {"type": "barge_in", "heard_tokens": 4})
            expect(st == 200 and answer == {"object": "session.event", "session_id": "ev-1",
                                            "type": "barge_in", "applied": True,
                                            "heard_tokens": 4,
                                            "context_tokens": len(prompt) + 4}, answer)
    c.close()
    expect(evs and evs[-1] == "[DONE]", evs[-1:])
    toks = [e for e in evs[:-1]]
    ids = [i for e in toks for i in e["choices"][0]["token_ids"]]
    expect(toks[-1]["choices"][0]["finish_reason"] == "abort" and len(ids) < n,
           "the barged stream ended %r after %d tokens" % (toks[-1]["choices"][0], len(ids)))
    # the next turn: what was heard, and the user's new words; the kept KV serves it
    nxt = prompt + ids[:4] + [40, 41, 42]
    out, fin, _, u = ids_of({"prompt": nxt, "max_tokens": 10}, {"X-Session-ID": "ev-1"})
    det = u.get("prompt_tokens_details") or {}
    expect(det.get("cached_tokens") == len(prompt) + 4, (det, len(prompt) + 4))
    if engine:  # the kept KV is the heard context's: the reply is what a cold prompt gets
        cold, _, _, _ = ids_of({"prompt": nxt, "max_tokens": 10})
        expect(cold == out, "after a barge-in %r, cold %r" % (out, cold))
    # a barge-in after the reply ended, half of it played: the context is cut back
    st, a = event("ev-1", {"type": "playback", "played_s": 1.0, "received_s": 2.0})
    expect(st == 200 and a["applied"], a)
    st, a = event("ev-1", {"type": "barge_in"})
    expect(st == 200 and a["applied"] and a["heard_tokens"] == 5 and
           a["context_tokens"] == len(nxt) + 5, a)
    third = nxt + out + [50, 51]
    _, _, _, u = ids_of({"prompt": third, "max_tokens": 4}, {"X-Session-ID": "ev-1"})
    det = u.get("prompt_tokens_details") or {}
    expect(det.get("cached_tokens") == len(nxt) + 5, (det, len(nxt) + 5))
    # the end of speech to the first audio the client reports: the audio TTFP
    time.sleep(0.3)  # /metrics shows what the runtime published a tick ago
    mid = metrics()
    expect(mid.get("cadenza:audio_ttfp_seconds_count", 0) ==
           before.get("cadenza:audio_ttfp_seconds_count", 0) + 2, "a TTFP a reply with audio")
    st, a = event("ev-2", {"type": "speech_start"})
    expect(st == 200 and not a["applied"] and a["preload"] == "none", a)
    st, a = event("ev-2", {"type": "speech_end"})
    expect(st == 200 and a["applied"], a)
    time.sleep(0.2)
    ids_of({"prompt": prompt, "max_tokens": 3}, {"X-Session-ID": "ev-2"})
    st, a = event("ev-2", {"type": "playback", "played_s": 0, "received_s": 0.4})
    expect(st == 200 and a["applied"], a)
    # bad events: 400 naming the field; a path that is no session's: 404
    for body, param in (({"type": "speak"}, "type"), ({}, "type"), ({"type": 3}, "type"),
                        ({"type": "playback", "played_s": 1}, "received_s"),
                        ({"type": "playback", "played_s": 2, "received_s": 1}, "played_s"),
                        ({"type": "playback", "played_s": -1, "received_s": 1}, "played_s"),
                        ({"type": "barge_in", "heard_tokens": 1.5}, "heard_tokens"),
                        ({"type": "speech_end", "played_s": 1}, "played_s"),
                        ({"type": "barge_in", "volume": 1}, "volume")):
        st, _, raw = request("POST", "/v1/sessions/ev-3/events", body)
        check_error(st, raw, 400, param)
    st, _, raw = request("POST", "/v1/sessions/ev-3/events", b"{not json")
    check_error(st, raw, 400)
    st, _, raw = request("POST", "/v1/sessions/ev-3/events", b"{\"type\": \"" + b"x" * 5000 + b"\"}")
    expect(st == 413, (st, raw[:200]))
    st, _, _ = request("POST", "/v1/sessions//events", {"type": "speech_end"})
    expect(st == 404, st)
    st, _, _ = request("GET", "/v1/sessions/ev-3/events")
    expect(st == 405, st)
    for _ in range(50):
        time.sleep(0.1)
        m = metrics()
        if m.get("cadenza:audio_ttfp_seconds_count", 0) > mid[
                "cadenza:audio_ttfp_seconds_count"]:
            break
    expect(m["cadenza:barge_ins_total"] == before.get("cadenza:barge_ins_total", 0) + 2, m)
    expect(m['cadenza:session_events_total{type="barge_in"}'] ==
           before.get('cadenza:session_events_total{type="barge_in"}', 0) + 2, m)
    got = m["cadenza:audio_ttfp_seconds_sum"] - mid["cadenza:audio_ttfp_seconds_sum"]
    expect(m["cadenza:audio_ttfp_seconds_count"] == mid["cadenza:audio_ttfp_seconds_count"] + 1
           and got >= 0.2, "audio TTFP %r: from the end of speech, 0.2 s before the request" % got)


def c_preload():
    """Speech-triggered preload (a server with offload and preload on, and a pool of a few
    thousand tokens): a session's KV, offloaded and evicted by another session, is loaded
    back on the user's speech start, and its next request finds it cached."""
    ctx = [(3 * i + 7) % 200 + 32 for i in range(1500)]
    ids_of({"prompt": ctx, "max_tokens": 8}, {"X-Session-ID": "pl-1"})
    # another conversation takes the pool
    other = [(11 * i + 5) % 200 + 32 for i in range(1500)]
    for k in range(2):
        ids_of({"prompt": other + [k], "max_tokens": 8}, {"X-Session-ID": "pl-2-%d" % k})
    st, a = event("pl-1", {"type": "speech_start"})
    expect(st == 200 and a["applied"] and a["preload"] == "started", a)
    time.sleep(0.5)
    _, _, _, u = ids_of({"prompt": ctx + [1, 2, 3], "max_tokens": 4}, {"X-Session-ID": "pl-1"})
    det = u.get("prompt_tokens_details") or {}
    expect(det.get("cached_tokens", 0) >= len(ctx), det)
    for _ in range(50):
        m = metrics()
        if m.get('cadenza:kv_preloads_total{outcome="hit"}', 0) >= 1:
            break
        time.sleep(0.1)
    expect(m['cadenza:kv_preloads_total{outcome="started"}'] >= 1 and
           m['cadenza:kv_preloads_total{outcome="hit"}'] >= 1, m)

CHECKS = {
    "plain": c_plain, "stream": c_stream, "chat": c_chat, "errors": c_errors,
    "auth": lambda: c_auth(sys.argv[3]), "auth_events": lambda: c_auth_events(sys.argv[3]),
    "sessions": c_sessions, "disconnect": c_disconnect,
    "metrics": c_metrics, "concurrent": lambda: c_concurrent(int(sys.argv[3]), int(sys.argv[4])),
    "held": lambda: c_held(int(sys.argv[3]), float(sys.argv[4])),
    "timed": lambda: c_timed(sys.argv[3], int(sys.argv[4]), int(sys.argv[5])),
    "engine": lambda: c_engine(int(sys.argv[3])),
    "events": lambda: c_events(len(sys.argv) > 3 and sys.argv[3] == "engine"),
    "preload": c_preload, "seed": c_seed, "stop": c_stop,
}

if __name__ == "__main__":
    CHECKS[sys.argv[2]]()

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
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "stop": ["\n"]})
    check_error(s, raw, 400, "stop", ["stop_token_ids"])
    s, _, raw = request("POST", "/v1/completions", {"prompt": "x", "stop": None, "max_tokens": 1})
    expect(s == 200, raw)
    s, _, raw = request("GET", "/v1/nothing")
    expect(s == 404 and json.loads(raw) == {"detail": "Not Found"}, (s, raw))
    s, _, raw = request("GET", "/v1/completions")
    expect(s == 405, s)
    # the server is still up and right
    c_plain()


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
                  body=json.dumps({"prompt": "long %d" % i, "max_tokens": 20000,
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

CHECKS = {
    "plain": c_plain, "stream": c_stream, "chat": c_chat, "errors": c_errors,
    "auth": lambda: c_auth(sys.argv[3]), "sessions": c_sessions, "disconnect": c_disconnect,
    "metrics": c_metrics, "concurrent": lambda: c_concurrent(int(sys.argv[3]), int(sys.argv[4])),
    "held": lambda: c_held(int(sys.argv[3]), float(sys.argv[4])),
    "timed": lambda: c_timed(sys.argv[3], int(sys.argv[4]), int(sys.argv[5])),
    "engine": lambda: c_engine(int(sys.argv[3])),
}

if __name__ == "__main__":
    CHECKS[sys.argv[2]]()

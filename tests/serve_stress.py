#!/usr/bin/env python3
"""serve_stress.py CADENZA SOURCE_ROOT [--seed S] [--count N] - the randomized stress suite's
share for `cadenza serve`: N servers, each on a config drawn from the seed (the modelled execution of a
text model on one stage, or the engine's execution of a tiny decoder with random weights; every scheduler with LRU or next-use eviction; idle KV dropped or offloaded;
windows and sinks; pools from a few blocks to the card's; block sizes down to 1; sequence
caps from 1; chunked prefill on and off; small stream bounds), each driven for a few
seconds by random clients at once: plain and streamed completions and chat, prompts as text
and as ids, several prompts in one request, sessions that extend or diverge from their
context, clients that go away mid-stream, clients that read slowly, requests refused for
their fields, stop token ids and strings, min_tokens, ignore_eos, returned token ids and a request's
own sampling (temperature, top_p, top_k, seed), the
interaction plane's events (speech start and end, playback, barge-in, now and then
mid-stream, and bad ones), and now and then `cadenza replay --endpoint` with a random
workload (a trace slice, Poisson arrivals, closed-loop sessions with think time, spoken
sessions played at the client with barge-ins and the interaction plane's events, or none;
as chat messages when the server has a tokenizer.json)
and a random --max-concurrency, then SIGTERM with requests in flight. A server passes when every response is
well formed (a stream ends with [DONE], a refusal is OpenAI's error object), it exits 0,
and its summary accounts for every request it took; a replay passes when it exits 0, its
summary accounts for every turn with none unfinished, every completed turn generated
exactly its max_tokens, every aborted turn was a barge-in, a spoken workload's every turn
was played, and no event failed in a run with no failed turn. Prints one line per failure and
"N passed, N failed"."""
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def config_sets(rng, engine):
    sets = []
    sched = rng.choice(["fcfs", "fcfs_scan", "liveserve", "voxserve", "bros"])
    sets.append("scheduler=%s" % sched)
    bt = rng.choice([1, 4, 16, 16, 32])
    sets.append("server.block_tokens=%d" % bt)
    blocks = rng.choice([None, rng.randint(4096 // bt + 8, 8192 // bt + 512), rng.randint(2000, 20000)])
    if engine and blocks:
        blocks = min(blocks, 65536 // bt)  # the engine allocates the pool
    if blocks:
        sets.append("server.kv_blocks=%d" % blocks)
    sets.append("server.max_num_seqs=%d" % rng.choice([1, 2, 4, 16, 256]))
    sets.append("server.max_num_batched_tokens=%d" % rng.choice([512, 2048, 8192]))
    if rng.random() < 0.2:
        sets.append("server.chunked_prefill=false")
    offload = rng.random() < 0.5
    sets.append("server.kv_idle=%s" % ("offload" if offload else "drop"))
    window = rng.random() < 0.15
    if window:
        sets.append("server.kv_window_tokens=%d" % rng.randint(64, 1024))
        sets.append("server.kv_sink_tokens=%d" % rng.randint(0, 32))
    else:
        sets.append("server.kv_evict=%s" % rng.choice(["lru", "next_use", "next_use_scan"]))
        if offload and rng.random() < 0.5:
            sets.append("server.kv_preload=true")
    return sets


class Client:
    def __init__(self, port, rng, log):
        self.port, self.rng, self.log = port, rng, log

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def body(self):
        r = self.rng
        chat = r.random() < 0.4
        b = {"max_tokens": r.randint(1, 64)}
        if chat:
            b["messages"] = [{"role": "user", "content": "word " * r.randint(1, 200)}]
            if r.random() < 0.3:
                b["messages"].insert(0, {"role": "system", "content": "be brief"})
        else:
            k = r.random()
            if k < 0.4:
                b["prompt"] = "token " * r.randint(1, 300)
            elif k < 0.7:
                b["prompt"] = [r.randint(0, 255) for _ in range(r.randint(1, 400))]
            else:
                b["prompt"] = ["p%d " % i * r.randint(1, 20) for i in range(r.randint(2, 4))]
        if r.random() < 0.5:
            b["stream"] = True
            if r.random() < 0.5:
                b["stream_options"] = {"include_usage": True}
        if r.random() < 0.05:
            b["n"] = 3  # refused
        if r.random() < 0.3:
            b["stop_token_ids"] = [r.randint(0, 4095) for _ in range(r.randint(1, 600))]
            if r.random() < 0.5:
                b["min_tokens"] = r.randint(0, b["max_tokens"])
        if r.random() < 0.25:  # stop strings: printable, or bytes a reply rarely holds
            b["stop"] = [r.choice(["a", "e ", "}", "ab", "\u00e9", "\n", "xyz!", chr(r.randint(33, 126))])
                         for _ in range(r.randint(1, 4))]
        if r.random() < 0.2:
            b["ignore_eos"] = r.random() < 0.5
        if r.random() < 0.3:
            b["return_token_ids"] = True
        if r.random() < 0.3:  # a request's own sampling (the engine applies it)
            b["temperature"] = r.choice([0, 0.5, 1.0, 2.0])
            if r.random() < 0.5:
                b["top_p"] = r.choice([0.1, 0.9, 1.0])
            if r.random() < 0.5:
                b["top_k"] = r.choice([-1, 1, 40, 100000])
            if r.random() < 0.5:
                b["seed"] = r.randint(-2 ** 40, 2 ** 40)
        return ("/v1/chat/completions" if chat else "/v1/completions"), b

    def event(self, session):
        """A random interaction-plane event for the session (now and then a bad one)."""
        r = self.rng
        kind = r.choice(["speech_start", "speech_end", "playback", "barge_in", "bad"])
        body = {"type": kind}
        if kind == "playback":
            rec = r.uniform(0, 30)
            body.update(played_s=r.uniform(0, rec), received_s=rec)
        elif kind == "barge_in":
            if r.random() < 0.5:
                body["heard_tokens"] = r.randint(0, 80)
            if r.random() < 0.5:
                body["played_s"] = r.uniform(0, 10)
        elif kind == "bad":
            body = r.choice([{"type": "speak"}, {"type": "playback", "played_s": 2,
                                                  "received_s": 1}, {"played_s": 1},
                             {"type": "barge_in", "heard_tokens": -1}])
        c = self.conn()
        try:
            c.request("POST", "/v1/sessions/%s/events" % session, body=json.dumps(body).encode(),
                      headers={"Content-Type": "application/json"})
            resp = c.getresponse()
            d = json.loads(resp.read())
            if kind == "bad":
                assert (resp.status == 400 and d["error"]["param"]) or resp.status == 503, (body, d)
            else:
                assert resp.status in (200, 503), (body, resp.status, d)
                if resp.status == 200:
                    assert d["type"] == kind and d["session_id"] == session, d
        except (OSError, http.client.HTTPException):
            pass  # the server stopping closes what is open
        finally:
            c.close()

    def one(self, session=None):
        r = self.rng
        path, body = self.body()
        headers = {"Content-Type": "application/json"}
        if session:
            headers["X-Session-ID"] = session
        c = self.conn()
        try:
            c.request("POST", path, body=json.dumps(body).encode(), headers=headers)
            resp = c.getresponse()
            if resp.status != 200:
                raw = resp.read()
                err = json.loads(raw)["error"]
                assert resp.status in (400, 404, 413, 503) and err["message"], raw
                return
            if not body.get("stream"):
                d = json.loads(resp.read())
                assert d["usage"]["completion_tokens"] >= 1 or all(
                    ch["finish_reason"] == "abort" for ch in d["choices"]), d
                for ch in d["choices"]:
                    ids = ch.get("token_ids")
                    assert (ids is not None) == bool(body.get("return_token_ids")), ch
                    if ch["finish_reason"] == "stop" and isinstance(ch["stop_reason"], str):
                        assert ch["stop_reason"] in body.get("stop", []), ch
                        text = ch["text"] if "text" in ch else ch["message"]["content"]
                        # (text from before min_tokens may hold one: it is not searched)
                        assert body.get("min_tokens") or not any(x in text for x in body["stop"]), ch
                    elif ch["finish_reason"] == "stop":
                        stop = body.get("stop_token_ids", [])
                        assert ch["stop_reason"] in stop, ch
                        assert ids is None or (ids[-1] == ch["stop_reason"] and
                                               len(ids) >= body.get("min_tokens", 0) and
                                               not set(ids[max(body.get("min_tokens", 0), 1) - 1:-1]) & set(stop)), ch
                return
            leave = r.random() < 0.15
            slow = r.random() < 0.1
            barge = session is not None and r.random() < 0.2
            data = b""
            while True:
                chunk = resp.read1(256 if slow else 65536)
                if not chunk:
                    break
                data += chunk
                if slow:
                    time.sleep(0.01)
                if leave and data.count(b"\n\n") >= 2:
                    c.sock.shutdown(socket.SHUT_RDWR)
                    return
                if barge and data.count(b"\n\n") >= 2:
                    barge = False
                    self.event(session)  # often a barge-in mid-stream
            events = [e for e in data.decode().split("\n\n") if e]
            assert events and events[-1] == "data: [DONE]", events[-2:]
            texts, why = {}, {}
            for e in events[:-1]:
                assert e.startswith("data: "), e
                d = json.loads(e[6:])
                for ch in d.get("choices") or []:
                    delta = ch.get("text") if "text" in ch else ch.get("delta", {}).get("content")
                    texts[ch["index"]] = texts.get(ch["index"], "") + (delta or "")
                    if ch.get("finish_reason"):
                        why[ch["index"]] = ch.get("stop_reason")
            for k, reason in why.items():
                if isinstance(reason, str):  # a stop string: none was sent (past min_tokens)
                    assert reason in body.get("stop", []), (reason, body.get("stop"))
                    assert body.get("min_tokens") or not any(
                        x in texts.get(k, "") for x in body["stop"]), (body["stop"], texts.get(k))
        except (OSError, http.client.HTTPException):
            pass  # the server stopping closes what is open
        finally:
            c.close()


def sessions_file(tmp, name, sessions):
    """Writes `sessions` as a cadenza sessions file tmp/name (docs/workload.md); its path."""
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(json.dumps({"format": "cadenza-sessions", "version": 1, "source": "stress",
                            "concurrency": 0, "hash_block_tokens": 0,
                            "arrivals_given": True, "think_given": True}) + "\n")
        for s in sessions:
            f.write(json.dumps(s) + "\n")
    return path


def replay_client(cz, root, port, rng, tmp, errors, tokdir):
    """One `cadenza replay --endpoint` run with a random workload: a trace slice, Poisson
    requests, closed-loop sessions, or spoken sessions (replies played at the client,
    barge-ins, speech before turns, the interaction plane's events or --no-events)."""
    kind = rng.choice(["trace", "poisson", "sessions", "spoken"])
    wl = {}
    if kind == "trace":
        wl = {"trace": {"path": os.path.join(
            root, "traces/data/azure_llm_2023_conv/AzureLLMInferenceTrace_conv.csv")},
              "max_requests": rng.randint(1, 15), "time_scale": rng.choice([0.02, 0.1, 0.3])}
    elif kind == "poisson":
        lo = rng.randint(1, 200)
        wl = {"synthetic": {"requests": rng.randint(1, 20),
                            "input_tokens": {"dist": "uniform", "min": lo, "max": lo + rng.randint(0, 300)},
                            "output_tokens": {"dist": "uniform", "min": 1, "max": rng.randint(1, 40)}},
              "arrivals": {"process": "poisson", "rate_rps": rng.choice([5, 20, 100])}}
    elif kind == "spoken":
        sessions = []
        for si in range(rng.randint(1, 4)):
            turns = []
            for _ in range(rng.randint(1, 4)):
                out = rng.randint(1, 30)
                audio = out * rng.choice([0.002, 0.01, 0.03])
                turns.append({"arrival_s": rng.uniform(0, 0.5),
                              "speech_s": rng.choice([0, rng.uniform(0, 0.1)]),
                              "in_text_tokens": rng.randint(1, 100),
                              "out_text_tokens": out, "out_audio_tokens": out,
                              "out_audio_s": audio, "think_s": rng.uniform(0, 0.2),
                              "barge_in_s": rng.choice([-1, rng.uniform(0, audio * 1.2)])})
            sessions.append({"session": "v%d" % si, "class": "rt",
                             "timing": rng.choice(["closed", "closed", "open"]), "turns": turns})
        wl = {"trace": {"path": sessions_file(tmp, "spoken.jsonl", sessions)}}
    else:
        sessions = []
        for si in range(rng.randint(1, 4)):
            turns = [{"arrival_s": rng.uniform(0, 0.5), "in_text_tokens": rng.randint(1, 100),
                      "out_text_tokens": rng.randint(1, 20), "think_s": rng.uniform(0, 0.2)}
                     for _ in range(rng.randint(1, 4))]
            sessions.append({"session": "s%d" % si, "class": "rt", "timing": "closed",
                             "turns": turns})
        wl = {"trace": {"path": sessions_file(tmp, "sessions.jsonl", sessions)}}
    cfg = os.path.join(tmp, "client.json")
    with open(cfg, "w") as f:
        json.dump({"model": "tiny-llama", "hardware": "cpu-host", "seed": rng.randint(1, 99),
                   "workload": wl}, f)
    summ = os.path.join(tmp, "client-summary.json")
    args = [cz, "replay", cfg, "--endpoint", "http://127.0.0.1:%d" % port, "--summary", summ,
            "--quiet"]
    mc = rng.choice([None, None, 1, 2, 8])
    if mc:
        args += ["--max-concurrency", str(mc)]
    if rng.random() < 0.3:
        args += ["--request-timeout", "90"]
    if kind == "spoken" and rng.random() < 0.25:
        args += ["--no-events"]
    chat = tokdir is not None and rng.random() < 0.6
    if chat:
        args += ["--api", "chat", "--tokenizer", tokdir]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    what = "replay (%s, max-concurrency %s%s)" % (json.dumps(wl)[:200], mc,
                                                 ", chat" if chat else "")
    if r.returncode != 0:
        errors.append("%s: exit %d: %s" % (what, r.returncode, r.stderr[-300:]))
        return
    s = json.load(open(summ))
    total = sum(s[k] for k in ("completed", "aborted", "rejected", "failed", "unfinished"))
    if total != s["requests"] or s["unfinished"]:
        errors.append("%s: requests %d, outcomes %d, unfinished %d" % (what, s["requests"], total,
                                                                     s["unfinished"]))
    elif s["http"]["max_tokens_honoured"] != s["completed"]:
        errors.append("%s: %d completed, %d with max_tokens" % (what, s["completed"],
                                                                s["http"]["max_tokens_honoured"]))
    elif s["driver"] != "http" or s["http"]["sent"] > s["requests"]:
        errors.append("%s: driver %s, %d sent" % (what, s["driver"], s["http"]["sent"]))
    elif s["aborted"] != s["http"]["barge_ins"]:
        errors.append("%s: %d aborted, %d barge-ins" % (what, s["aborted"], s["http"]["barge_ins"]))
    elif kind == "spoken" and s.get("spoken_turns") != s["requests"]:
        errors.append("%s: %d requests, %s spoken turns" % (what, s["requests"],
                                                           s.get("spoken_turns")))
    elif s["failed"] == 0 and s["http"]["events"]["failed"]:
        errors.append("%s: %d events failed (%s)" % (what, s["http"]["events"]["failed"],
                                                     s["http"]["events"].get("first_error")))
    elif s["http"]["prompt_len_missed"]:
        errors.append("%s: %d messages missed their token count"
                      % (what, s["http"]["prompt_len_missed"]))
    elif s["http"]["replies_carried_as_count"]:
        # cadenza serve returns every reply's ids: a conversation is carried as its ids
        errors.append("%s: %d replies carried without the server's ids"
                      % (what, s["http"]["replies_carried_as_count"]))


def run_one(cz, root, seed, seconds):
    rng = random.Random(seed)
    engine = rng.random() < 0.4
    sets = config_sets(rng, engine)
    tmp = tempfile.mkdtemp()
    portf = os.path.join(tmp, "port")
    summ = os.path.join(tmp, "s.json")
    cfg = "experiments/engine/cpu.json" if engine else "experiments/default.json"
    args = [cz, "serve", os.path.join(root, cfg), "--port", "0",
            "--port-file", portf, "--quiet", "--summary", summ,
            "--max-pending-tokens", str(rng.choice([16, 64, 4096]))]
    if engine:
        args += ["--execution", "engine", "--threads", "1"]
    tokdir = None
    if rng.random() < 0.3:
        # a tokenizer.json (the tokenizer suite's Llama-3 one): text is tokenized with it,
        # and a replay may send chat messages made to their counts under it
        tokdir = os.path.join(tmp, "tok")
        os.mkdir(tokdir)
        shutil.copy(os.path.join(root, "tests/fuzz/corpus/tokenizer/llama3"),
                    os.path.join(tokdir, "tokenizer.json"))
        args += ["--model-dir", tokdir]
    for s in sets:
        args += ["--set", s]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.time()
    while not (os.path.exists(portf) and open(portf).read().strip()):
        if p.poll() is not None:
            out, err = p.communicate()
            if p.returncode == 2:
                if os.environ.get("CZ_STRESS_VERBOSE"):
                    print("refused:", err.decode().strip())
                return None  # a config the loader refuses
            return "exit %d before listening: %s" % (p.returncode, err.decode()[-400:])
        if time.time() - t0 > 30:
            p.kill()
            return "no port within 30 s"
        time.sleep(0.02)
    port = int(open(portf).read())
    errors = []
    stop = time.time() + seconds

    def worker(k):
        c = Client(port, random.Random(seed * 1000 + k), None)
        session = "s%d" % k if k % 2 else None
        while time.time() < stop:
            try:
                if session and rng.random() < 0.3:
                    c.event(session)
                c.one(session if rng.random() < 0.7 else None)
            except AssertionError as e:
                errors.append("client %d: %s" % (k, str(e)[:300]))
                return

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(rng.randint(2, 12))]
    if rng.random() < 0.5:
        ts.append(threading.Thread(target=replay_client,
                                   args=(cz, root, port, random.Random(seed + 7), tmp, errors,
                                         tokdir)))
    for t in ts:
        t.start()
    time.sleep(seconds * rng.uniform(0.5, 1.0))
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        return "no exit within 60 s of SIGTERM (%s)" % " ".join(sets)
    for t in ts:
        t.join(timeout=150)
    why = ""
    if p.returncode != 0:
        why = "exit %d: %s" % (p.returncode, err.decode()[-600:])
    elif errors:
        why = errors[0]
    else:
        s = json.load(open(summ))
        total = sum(s[k] for k in ("completed", "aborted", "rejected", "failed", "unfinished"))
        if total != s["requests"]:
            why = "requests %s != outcomes %s" % (s["requests"], total)
        elif s["unfinished"]:
            why = "%d unfinished" % s["unfinished"]
    if why:
        why += " (config: %s%s --set %s)" % (cfg, " --execution engine" if engine else "",
                                            " --set ".join(sets))
    return why


def main():
    cz = os.path.abspath(sys.argv[1])
    root = os.path.abspath(sys.argv[2])
    seed, count, seconds = 1, 5, 4.0
    a = sys.argv[3:]
    while a:
        if a[0] == "--seed":
            seed = int(a[1])
        elif a[0] == "--count":
            count = int(a[1])
        elif a[0] == "--seconds":
            seconds = float(a[1])
        a = a[2:]
    passed = failed = refused = 0
    for k in range(count):
        s = seed * 1000003 + k
        why = run_one(cz, root, s, seconds)
        if why is None:
            refused += 1
            passed += 1
        elif why:
            failed += 1
            print("FAIL server %d: %s" % (s, why), flush=True)
        else:
            passed += 1
    print("serve stress: %d servers, %d refused by the config loader" % (count, refused))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

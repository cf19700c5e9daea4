#!/usr/bin/env python3
"""tests/http_fake_server.py PORT_FILE - an OpenAI-style server that fails in every way a
streamed completion can, one way per request in arrival order, for tests/http_replay.sh:
  1. HTTP 500 with an OpenAI error object
  2. a token chunk, then an error event in the stream
  3. two token chunks, then the connection closes (no finish_reason, no [DONE])
  4. an event that is not a chunk
  5. [DONE] with no token chunk
  6. the connection closes before any response
  7. one token chunk, then nothing for 30 s (a stalled server: the client's timeout)
  8. a whole stream: 3 token chunks, the finishing chunk, usage, [DONE]
then whole streams again. It takes no interaction-plane events: POST /v1/sessions/ID/events
answers 404 as FastAPI does (vLLM's "Not Found"), not counted among the requests. Binds
loopback on a free port and writes it to PORT_FILE."""
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
count = [0]


def chunk(text, finish=None):
    return "data: " + json.dumps({"id": "cmpl-x", "object": "text_completion", "created": 1,
                                  "model": "m", "choices": [{"index": 0, "text": text,
                                                             "logprobs": None,
                                                             "finish_reason": finish}]}) + "\n\n"


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path.startswith("/v1/sessions/"):
            body = json.dumps({"detail": "Not Found"}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with lock:
            count[0] += 1
            k = count[0]
        if k == 6:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if k == 1:
            body = json.dumps({"error": {"message": "the model is asleep", "type": "InternalServerError",
                                         "param": None, "code": 500}}).encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if k == 2:
            out = chunk(" a") + "data: " + json.dumps({"error": {"object": "error", "message": "out of memory",
                                                                   "type": "InternalServerError", "code": 500}}) + "\n\n"
        elif k == 3:
            out = chunk(" a") + chunk(" b")
        elif k == 4:
            out = chunk(" a") + "data: {not json\n\n"
        elif k == 5:
            out = "data: [DONE]\n\n"
        elif k == 7:
            self.wfile.write(chunk(" a").encode())
            self.wfile.flush()
            time.sleep(30)
            return
        else:
            out = chunk(" a") + chunk(" b") + chunk(" c") + chunk("", "length")
            out += "data: " + json.dumps({"id": "cmpl-x", "choices": [], "usage": {
                "prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}) + "\n\n"
            out += "data: [DONE]\n\n"
        self.wfile.write(out.encode())


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()

"""A scripted OpenAI-protocol server for the room assistant's tests (python3
stdlib only): it answers POST /v1/chat/completions from a script of replies,
in order, and records every request it received (path, headers, JSON body).

A script entry is a string (the model's message), or a dict:
  {"content": "..."}            a normal answer
  {"status": 500, "body": ...}  that status with that body (str or JSON)
  {"delay": 3.0, ...}           wait that long first (for timeouts)
  {"raw": b"..."}               that body with status 200, as it is
When the script runs out, the answer is 500 "script exhausted".
"""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedLLM:
    def __init__(self, script=()):
        self.script = list(script)
        self.requests = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with stub.lock:
                    stub.requests.append({"path": self.path,
                                          "headers": dict(self.headers),
                                          "body": body})
                    step = stub.script.pop(0) if stub.script else \
                        {"status": 500, "body": {"error": {"message": "script exhausted"}}}
                if isinstance(step, str):
                    step = {"content": step}
                if step.get("delay"):
                    time.sleep(step["delay"])
                if "raw" in step:
                    status, out = 200, step["raw"]
                elif "content" in step:
                    status = 200
                    out = json.dumps({
                        "id": "chatcmpl-test", "object": "chat.completion",
                        "created": int(time.time()), "model": (body or {}).get("model"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant",
                                                 "content": step["content"]}}],
                    }).encode()
                else:
                    status = step.get("status", 500)
                    b = step.get("body", "")
                    out = (b if isinstance(b, str) else json.dumps(b)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the daemon gave up waiting

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, *steps):
        with self.lock:
            self.script.extend(steps)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

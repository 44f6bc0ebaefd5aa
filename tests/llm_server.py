"""A local OpenAI-compatible chat-completions server for the generator's tests and benchmark.

Real HTTP on 127.0.0.1 (stdlib `http.server`, one thread per connection, keep-alive),
so the real `openai` client talks to it exactly as to vLLM or api.openai.com. By
default it answers like the offline backend (`boolcl.generate.offline.respond`),
which makes its answers meaningful to the pipeline. Knobs:

- `latency`: seconds added to every request;
- `require_key`: answer 401 unless `Authorization: Bearer <key>`;
- `script(action, times=..., when=...)`: the next matching requests get a scripted
  status (429 with Retry-After, 500, 401, ...), a delay (to cause client timeouts),
  a given answer text, or a malformed body. `when` is a prompt kind ('simple',
  'not', 'answer', ...) or a predicate on the messages.

In a test: `with LLMServer() as srv: ... srv.base_url ...`. As a process (for the
benchmark, so the server does not share the client's GIL):
`python tests/llm_server.py --latency 0.3` prints `READY <base_url>` and serves
until stdin closes or it is killed.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from boolcl.generate import offline, prompts  # noqa: E402


@dataclass
class Rule:
    action: dict
    times: int | None  # None: forever
    when: object = None  # None | kind string | callable(messages) -> bool

    def matches(self, messages: list[dict]) -> bool:
        if self.when is None:
            return True
        if isinstance(self.when, str):
            return prompts.kind_of(messages) == self.when
        return bool(self.when(messages))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


class LLMServer:
    def __init__(self, responder: Callable[[list[dict]], str] | None = None, *, latency: float = 0.0,
                 require_key: str | None = None, host: str = "127.0.0.1", port: int = 0):
        self.responder = responder or offline.respond
        self.latency = latency
        self.require_key = require_key
        self.rules: list[Rule] = []
        self.log: list[dict] = []  # one entry per request: kind, status, auth header seen
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests the server was handling at once
        self.lock = threading.Lock()
        self._httpd = _Server((host, port), self._handler())
        self._thread: threading.Thread | None = None

    # --- scripting ------------------------------------------------------------------------
    def script(self, action: dict, *, times: int | None = 1, when=None) -> "LLMServer":
        with self.lock:
            self.rules.append(Rule(dict(action), times, when))
        return self

    def _take(self, messages: list[dict]) -> dict | None:
        with self.lock:
            for rule in self.rules:
                if (rule.times is None or rule.times > 0) and rule.matches(messages):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule.action
        return None

    @property
    def requests(self) -> int:
        with self.lock:
            return len(self.log)

    def statuses(self) -> list[int]:
        with self.lock:
            return [e["status"] for e in self.log]

    # --- lifecycle ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "LLMServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- HTTP -----------------------------------------------------------------------------
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # small replies must not wait for a delayed ACK (~40 ms)

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json", headers: dict | None = None):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, str(v))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def _error(self, status: int, message: str, headers: dict | None = None):
                body = json.dumps({"error": {"message": message, "type": "test_server", "code": status}}).encode()
                self._send(status, body, headers=headers)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [{"id": "test-model", "object": "model"}]}).encode())
                else:
                    self._error(404, "not found")

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._error(404, f"no route {self.path}")
                    return
                try:
                    req = json.loads(raw)
                    messages = req["messages"]
                except (ValueError, KeyError, TypeError):
                    self._error(400, "invalid JSON body")
                    return
                auth = self.headers.get("Authorization", "")
                entry = {"kind": prompts.kind_of(messages), "auth": auth, "model": req.get("model"),
                         "status": 200, "t": time.time()}
                with server.lock:
                    server.log.append(entry)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(req, messages, auth, entry)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, req: dict, messages: list[dict], auth: str, entry: dict):
                action = server._take(messages) or {}
                delay = server.latency + float(action.get("delay", 0.0))
                if delay:
                    time.sleep(delay)
                if server.require_key is not None and auth != f"Bearer {server.require_key}":
                    entry["status"] = 401
                    self._error(401, "Incorrect API key provided.")
                    return
                status = int(action.get("status", 200))
                if status != 200:
                    entry["status"] = status
                    headers = {}
                    if "retry_after" in action:
                        headers["Retry-After"] = action["retry_after"]
                    self._error(status, action.get("message", f"scripted {status}"), headers)
                    return
                if "body" in action:  # a malformed response
                    self._send(200, str(action["body"]).encode(), ctype=action.get("ctype", "application/json"))
                    return
                text = action["content"] if "content" in action else server.responder(messages)
                finish = action.get("finish_reason", "stop")
                prompt_tokens = sum(len(m.get("content") or "") for m in messages) // 4
                body = {"id": f"chatcmpl-{len(server.log)}", "object": "chat.completion", "created": int(time.time()),
                        "model": req.get("model", "test-model"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": finish}],
                        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text or "") // 4 + 1,
                                  "total_tokens": prompt_tokens + len(text or "") // 4 + 1}}
                self._send(200, json.dumps(body).encode())

        return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--require-key")
    args = ap.parse_args(argv)
    srv = LLMServer(latency=args.latency, require_key=args.require_key, port=args.port).start()
    print(f"READY {srv.base_url}", flush=True)
    try:
        sys.stdin.read()  # serve until the parent closes our stdin (or kills us)
    except KeyboardInterrupt:
        pass
    srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The one fake Ollama server of the tests: 127.0.0.1, the real HTTP API, scripted turns.

Shared by the adapter's tests (ChatOllama, OllamaEmbeddings), the agent's and the CLI's.

Endpoints: ``GET /api/tags`` (the pulled models), ``POST /api/show`` (capabilities),
``POST /api/chat`` (streamed NDJSON, word by word, with ``tool_calls``; 400 "does not
support tools" when tools go to a model without them), ``POST /api/embed`` (hashing vectors).
Each chat request is answered by the next step of the script: a message dict
(``{"content": ...}`` or ``{"tool_calls": [...]}``) or a callable of the request body.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from magnetic_core import HashingEmbedder

Step = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted reply calling one tool."""
    return {"tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


def say(text: str) -> dict[str, Any]:
    """A scripted text reply."""
    return {"content": text}


def last_tool_result(body: dict[str, Any]) -> str:
    """Content of the last tool message the client sent."""
    return [m["content"] for m in body["messages"] if m["role"] == "tool"][-1]


def numbered_facts(body: dict[str, Any]) -> dict[int, str]:
    """The ``N. text`` lines of the last user message (how fact lists are shown to models)."""
    text = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    return {int(n): t.strip() for n, t in re.findall(r"^\s*(\d+)\.\s+(.*)$", text, re.M)}


class FakeOllama:
    """The server; use as a context manager.

    ``chat_requests`` and ``embed_requests`` record every request body; ``models`` maps the
    pulled models to their capabilities; ``delay`` slows each chat answer.
    """

    def __init__(
        self,
        script: list[Step] | None = None,
        *,
        models: dict[str, list[str]] | None = None,
        delay: float = 0.0,
        embed_dim: int = 256,
    ) -> None:
        self.script: list[Step] = list(script or [])
        self.models = models or {"qwen2.5:3b": ["completion", "tools"]}
        # Without a model list, any model name answers (with tools), as a pulled model would.
        self.any_model = models is None
        self.delay = delay
        self.hide_capabilities = False  # as Ollama servers before capabilities existed
        self.token_delay = 0.0  # seconds between streamed lines, to watch tokens arrive
        self.chat_requests: list[dict[str, Any]] = []
        self.embed_requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._embedder = HashingEmbedder(dim=embed_dim)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        """``host:port`` (as ``OLLAMA_HOST`` takes it)."""
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    @property
    def url(self) -> str:
        """``http://host:port`` (as ``base_url=`` takes it)."""
        return f"http://{self.host}"

    def __enter__(self) -> FakeOllama:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def capabilities(self, model: str | None) -> list[str] | None:
        """What ``model`` can do, or None when it is not pulled."""
        caps = self.models.get(model or "")
        if caps is None and self.any_model and model:
            return ["completion", "tools"]
        return caps

    def chat(self, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
        with self.lock:
            self.chat_requests.append(body)
            caps = self.capabilities(body["model"])
            if caps is None:
                return 404, [{"error": f"model '{body['model']}' not found"}]
            if body.get("tools") and "tools" not in caps:
                return 400, [
                    {"error": f"registry.ollama.ai/library/{body['model']} does not support tools"}
                ]
            if not self.script:
                return 500, [{"error": "the fake's script ran out"}]
            step = self.script.pop(0)
        reply = step(body) if callable(step) else step
        time.sleep(self.delay)
        return 200, _stream(body["model"], reply)


def _stream(model: str, reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The NDJSON lines Ollama streams: content word by word, tool calls, then done."""
    head = {"model": model, "created_at": "2026-01-01T00:00:00Z"}
    words = re.findall(r"\S+\s*", reply.get("content", ""))
    lines = [{**head, "message": {"role": "assistant", "content": w}, "done": False} for w in words]
    if reply.get("tool_calls"):
        message = {"role": "assistant", "content": "", "tool_calls": reply["tool_calls"]}
        lines.append({**head, "message": message, "done": False})
    end = {"role": "assistant", "content": ""}
    lines.append(
        {
            **head,
            "message": end,
            "done": True,
            "done_reason": "stop",
            "eval_count": 3,
            "prompt_eval_count": 5,
        }
    )
    return lines


def _handler(fake: FakeOllama) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, status: int, obj: Any) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def _trickle(self, lines: list[dict[str, Any]]) -> None:
            """Stream line by line (HTTP/1.0: the body ends when the connection closes)."""
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()
            for line in lines:
                self.wfile.write((json.dumps(line) + "\n").encode())
                self.wfile.flush()
                time.sleep(fake.token_delay)
            self.close_connection = True

        def do_GET(self) -> None:
            if self.path == "/api/tags":
                models = [
                    {
                        "name": m,
                        "model": m,
                        "size": 1,
                        "digest": "0" * 12,
                        "modified_at": "2026-01-01T00:00:00Z",
                        "details": {},
                    }
                    for m in fake.models
                ]
                self._json(200, {"models": models})
            else:
                self._json(404, {"error": "not found"})

        def do_HEAD(self) -> None:
            self._send(200, b"", "text/plain")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            if self.path == "/api/show":
                caps = fake.capabilities(body.get("model") or body.get("name"))
                if caps is None:
                    self._json(404, {"error": f"model '{body.get('model')}' not found"})
                else:
                    shown = {"details": {}, "modelfile": "", "model_info": {}, "template": ""}
                    if not fake.hide_capabilities:
                        shown["capabilities"] = caps
                    self._json(200, shown)
            elif self.path == "/api/chat":
                status, lines = fake.chat(body)
                if status != 200:
                    self._json(status, lines[0])
                elif body.get("stream", True) and fake.token_delay:
                    self._trickle(lines)
                elif body.get("stream", True):
                    payload = "".join(json.dumps(x) + "\n" for x in lines).encode()
                    self._send(200, payload, "application/x-ndjson")
                else:
                    text = "".join(x["message"]["content"] for x in lines)
                    merged = {**lines[-1], "message": {**lines[-2]["message"], "content": text}}
                    self._json(200, merged)
            elif self.path == "/api/embed":
                fake.embed_requests.append(body)
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vectors = fake._embedder.embed_documents(inputs)
                self._json(
                    200,
                    {"model": body["model"], "embeddings": [list(map(float, v)) for v in vectors]},
                )
            else:
                self._json(404, {"error": "not found"})

    return Handler

"""A scripted OpenAI-compatible chat-completions server, for tests: real HTTP on loopback.

It answers each POST /v1/chat/completions with the next entry of a script (tool calls, plain
text, bad JSON arguments, a cut-off reply, an HTTP error, a slow reply, a body trickled a byte
at a time, usage and cost fields),
records every request it got (so a test can check what was sent, e.g. that the cap statement was
there or that no key leaked), checks the bearer key when given one, answers 404 for a model it does
not serve (as vLLM does), and serves GET /v1/models and GET /health.

    with ScriptedServer([calls("ls", "pwd"), text("done")], api_key="sk-test") as server:
        ... ModelConfig(base_url=server.base_url, model=server.model, ...) ...
        assert len(server.requests) == 2
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODEL = "scripted-model"
TRICKLE_HEADER = "X-Scripted-Trickle"


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted answer. status != 200 answers with an error object instead of a reply."""

    content: str | None = None
    # (tool name, raw arguments text) per call; the text is sent as is, valid JSON or not.
    tool_calls: tuple[tuple[str, str], ...] = ()
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    reasoning: str | None = None  # sent as message.reasoning_content
    # usage object to send; None = computed from the sizes; {} = no usage at all.
    usage: dict[str, Any] | None = None
    cost: float | None = None  # added as usage.cost (OpenRouter's field)
    status: int = 200
    error_message: str = ""
    retry_after: float | None = None
    delay_s: float = 0.0  # wait this long before answering
    # > 0: send the status and headers at once, then the body one byte every trickle_s seconds
    # (an endpoint that never times out between bytes, yet never finishes)
    trickle_s: float = 0.0
    raw_body: str | None = None  # send exactly this body with `status` (a broken gateway)
    tool_call_ids: tuple[str, ...] = ()  # override the generated ids ("" = send none)


Script = ScriptedReply | Callable[[dict[str, Any]], ScriptedReply]


def calls(*commands: str, **kw: Any) -> ScriptedReply:
    """A reply with one bash tool call per command."""
    return ScriptedReply(
        tool_calls=tuple(("bash", json.dumps({"command": c})) for c in commands), **kw
    )


def text(content: str, **kw: Any) -> ScriptedReply:
    """A reply with no tool call."""
    return ScriptedReply(content=content, **kw)


def bad_json(arguments: str = '{"command": "ls -la', **kw: Any) -> ScriptedReply:
    """A bash call whose arguments are not valid JSON."""
    return ScriptedReply(tool_calls=(("bash", arguments),), **kw)


def truncated(content: str = "I will now run\n```bash\nls -", **kw: Any) -> ScriptedReply:
    """A reply cut off at the token limit."""
    return ScriptedReply(content=content, finish_reason="length", **kw)


def error(status: int, message: str = "", **kw: Any) -> ScriptedReply:
    return ScriptedReply(status=status, error_message=message or f"scripted error {status}", **kw)


def slow(delay_s: float, reply: ScriptedReply) -> ScriptedReply:
    from dataclasses import replace

    return replace(reply, delay_s=delay_s)


def trickle(every_s: float, reply: ScriptedReply) -> ScriptedReply:
    """`reply` answered 200 at once, its body a byte every `every_s` seconds."""
    from dataclasses import replace

    return replace(reply, trickle_s=every_s)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON, or the raw text when it was not JSON
    raw: str = ""


@dataclass
class ScriptedServer:
    script: Iterable[Script]
    api_key: str | None = None
    models: tuple[str, ...] = (DEFAULT_MODEL,)
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script = list(self.script)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.replies_served = 0

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        server = ThreadingHTTPServer((self.host, self.port), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def model(self) -> str:
        return self.models[0]

    def add(self, *replies: Script) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # --- answering --------------------------------------------------------------------------

    def _next(self, body: dict[str, Any]) -> ScriptedReply | None:
        with self._lock:
            if not self._script:
                return None
            entry = self._script.pop(0)
            self.replies_served += 1
        return entry(body) if callable(entry) else entry

    def _answer_chat(self, body: Any) -> tuple[int, dict[str, str], str, float]:
        """(status, extra headers, body text, delay) for one chat request; a trickled reply's
        headers carry `X-Scripted-Trickle` (the handler's cue, taken off before sending)."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _err(400, "request body must be a JSON object with 'messages'", "BadRequest")
        if body.get("model") not in self.models:
            return _err(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        reply = self._next(body)
        if reply is None:
            n = len(self.chat_requests)
            return _err(400, f"scripted server: no reply left for request {n}", "BadRequest")
        headers = {}
        if reply.trickle_s > 0:
            headers[TRICKLE_HEADER] = str(reply.trickle_s)
        if reply.retry_after is not None:
            headers["Retry-After"] = str(reply.retry_after)
        if reply.raw_body is not None:
            return reply.status, headers, reply.raw_body, reply.delay_s
        if reply.status != 200:
            status, _, text_, _ = _err(reply.status, reply.error_message, "ScriptedError")
            return status, headers, text_, reply.delay_s
        return (
            200,
            headers,
            json.dumps(_completion(body, reply, self.replies_served)),
            reply.delay_s,
        )


def _completion(body: dict[str, Any], reply: ScriptedReply, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        ids = reply.tool_call_ids or tuple(
            f"call_{n}_{i}" for i in range(1, len(reply.tool_calls) + 1)
        )
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, (name, args) in zip(ids, reply.tool_calls, strict=True)
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    out: dict[str, Any] = {
        "id": f"chatcmpl-scripted-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    usage = reply.usage
    if usage is None:
        produced = (reply.content or "") + "".join(a for _, a in reply.tool_calls)
        prompt = max(len(json.dumps(body.get("messages"))) // 4, 1)
        completion = max(len(produced) // 4, 1)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    if usage or reply.cost is not None:
        usage = dict(usage)
        if reply.cost is not None:
            usage["cost"] = reply.cost
        out["usage"] = usage
    return out


def _err(status: int, message: str, kind: str) -> tuple[int, dict[str, str], str, float]:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return status, {}, json.dumps(body), 0.0


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def _record(self, body: Any, raw: str) -> None:
            with server._lock:
                server.requests.append(
                    RecordedRequest(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                        raw,
                    )
                )

        def _send(self, status: int, text_: str, headers: dict[str, str] | None = None) -> None:
            data = text_.encode()
            headers = dict(headers or {})
            every_s = float(headers.pop(TRICKLE_HEADER, 0.0))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if every_s <= 0:
                self.wfile.write(data)
                return
            self.wfile.flush()
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                time.sleep(every_s)

        def _authorized(self) -> bool:
            if server.api_key is None:
                return True
            if self.headers.get("Authorization", "") == f"Bearer {server.api_key}":
                return True
            status, _, body, _ = _err(401, "Incorrect API key provided.", "invalid_api_key")
            self._send(status, body)
            return False

        def do_GET(self) -> None:
            self._record(None, "")
            if self.path.rstrip("/") == "/health":
                self._send(200, "")
                return
            if self.path.rstrip("/") == "/v1/models":
                if not self._authorized():
                    return
                data = [{"id": m, "object": "model", "owned_by": "scripted"} for m in server.models]
                self._send(200, json.dumps({"object": "list", "data": data}))
                return
            self._send(*_err(404, f"no route {self.path}", "NotFound")[::2])

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", "replace")
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            self._record(body, raw)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(*_err(404, f"no route {self.path}", "NotFound")[::2])
                return
            if not self._authorized():
                return
            status, headers, text_, delay = server._answer_chat(body)
            if delay:
                time.sleep(delay)
            try:
                self._send(status, text_, headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout test)

    return Handler

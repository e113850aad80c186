"""`depthtui env serve`: OpenEnv's contract over TerminalEnv (docs/rl.md).

HTTP: `POST /reset` (body: seed, episode_id and the row's task, fault, step, group), `POST /step`
(body: {"action": {"command": "..."}} or {"action": {"finish": true}}), `GET /state`, `GET
/health`, `GET /schema`, `GET /metadata`; and `/ws`, the WebSocket session OpenEnv's own client
(`EnvClient`) speaks, one TerminalEnv per connection. Every reply is OpenEnv's
{"observation": {...}, "reward": ..., "done": ...}; the observation carries the output, the
remaining budget and the stored episode's id, and the reward comes with `done`.

The episodes are TerminalEnv's: the one episode path, stored with mode `rl`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engine.rl import websocket as ws
from engine.rl.env import TerminalEnv

ROW_KEYS = ("task", "fault", "seed", "step", "group")

SCHEMA = {
    "action": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "A bash command; '' closes the part."},
            "finish": {"type": "boolean", "description": "End the episode and grade it."},
        },
    },
    "observation": {
        "type": "object",
        "properties": {
            "output": {"type": "string"},
            "remaining_budget": {"type": ["integer", "null"]},
            "episode": {"type": ["integer", "null"]},
            "reward": {"type": ["number", "null"]},
            "done": {"type": "boolean"},
        },
    },
    "state": {
        "type": "object",
        "properties": {
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer"},
            "store_episode": {"type": ["integer", "null"]},
            "done": {"type": "boolean"},
        },
    },
}


class ActionError(ValueError):
    """An action or reset body that is not what the schema says; the message names the field."""


class Session:
    """One client's environment: OpenEnv's reset/step/state over a TerminalEnv."""

    def __init__(self, env: TerminalEnv) -> None:
        self.env = env
        self.label: str | None = None
        self.step_count = 0
        self.lock = threading.Lock()

    def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ActionError("reset: the body must be a JSON object")
        row = {k: data[k] for k in ROW_KEYS if data.get(k) is not None}
        with self.lock:
            self.label = None if data.get("episode_id") is None else str(data["episode_id"])
            self.step_count = 0
            return self._payload(self.env.reset(**row))

    def step(self, action: Any) -> dict[str, Any]:
        if not isinstance(action, dict):
            raise ActionError('step: "action" must be an object such as {"command": "ls"}')
        with self.lock:
            if action.get("finish") is True:
                self.env.get_reward()
                return self._payload("")
            command = action.get("command")
            if not isinstance(command, str):
                raise ActionError('step: "action.command" must be a string')
            self.step_count += 1
            return self._payload(self.env.bash(command))

    def state(self) -> dict[str, Any]:
        eid = self.env._episode_id()
        return {
            "episode_id": self.label if self.label is not None else eid and str(eid),
            "step_count": self.step_count,
            "store_episode": eid,
            "done": self.env._over(),
        }

    def close(self) -> None:
        self.env._close()

    def _payload(self, output: str) -> dict[str, Any]:
        done = self.env._over()
        reward = self.env.get_reward() if done else None
        observation = {
            "output": output,
            "remaining_budget": self.env._remaining_budget(),
            "episode": self.env._episode_id(),
        }
        return {"observation": observation, "reward": reward, "done": done}


class EnvServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], factory: Callable[[], TerminalEnv]) -> None:
        super().__init__(address, Handler)
        self.factory = factory
        self.sessions: list[Session] = []
        self.http_session: Session | None = None
        self.guard = threading.Lock()

    def new_session(self) -> Session:
        session = Session(self.factory())
        with self.guard:
            self.sessions.append(session)
        return session

    def shared(self) -> Session:
        """The session the plain HTTP endpoints share."""
        with self.guard:
            if self.http_session is None:
                self.http_session = Session(self.factory())
                self.sessions.append(self.http_session)
            return self.http_session

    def server_close(self) -> None:
        super().server_close()
        for session in list(self.sessions):
            session.close()


class Handler(BaseHTTPRequestHandler):
    server: EnvServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the store records every episode

    def do_GET(self) -> None:
        if self.path == "/ws":
            self._websocket()
        elif self.path == "/health":
            self._json(200, {"status": "healthy"})
        elif self.path == "/schema":
            self._json(200, SCHEMA)
        elif self.path == "/metadata":
            self._json(200, {"name": "depthtui", "description": "terminal tasks (docs/rl.md)"})
        elif self.path == "/state":
            self._json(200, self.server.shared().state())
        else:
            self._json(404, {"detail": f"no such endpoint: GET {self.path}"})

    def do_POST(self) -> None:
        try:
            body = self._body()
            if self.path == "/reset":
                self._json(200, self.server.shared().reset(body))
            elif self.path == "/step":
                if not isinstance(body, dict) or "action" not in body:
                    raise ActionError('step: the body must be {"action": {...}}')
                self._json(200, self.server.shared().step(body["action"]))
            else:
                self._json(404, {"detail": f"no such endpoint: POST {self.path}"})
        except ActionError as exc:
            self._json(422, {"detail": str(exc)})

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            return json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            raise ActionError(f"the body is not JSON: {exc.msg} at position {exc.pos}") from exc

    def _json(self, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _websocket(self) -> None:
        key = self.headers.get("Sec-WebSocket-Key")
        if not key or (self.headers.get("Upgrade") or "").lower() != "websocket":
            self._json(400, {"detail": "/ws needs a WebSocket upgrade"})
            return
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", ws.accept_key(key))
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        session = self.server.new_session()
        try:
            while True:
                try:
                    message = json.loads(ws.read_message(self.rfile, self.wfile))
                except ws.Closed:
                    break
                except json.JSONDecodeError as exc:
                    self._ws_error(f"Invalid JSON: {exc}", "INVALID_JSON")
                    continue
                if not isinstance(message, dict) or message.get("type") == "close":
                    break
                self._ws_answer(session, message)
        finally:
            session.close()
            ws.send_close(self.wfile)

    def _ws_answer(self, session: Session, message: dict[str, Any]) -> None:
        kind = message.get("type")
        try:
            if kind == "reset":
                reply = {"type": "observation", "data": session.reset(message.get("data") or {})}
            elif kind == "step":
                reply = {"type": "observation", "data": session.step(message.get("data"))}
            elif kind == "state":
                reply = {"type": "state", "data": session.state()}
            else:
                self._ws_error(f"unknown message type {kind!r}", "UNKNOWN_TYPE")
                return
        except ActionError as exc:
            self._ws_error(str(exc), "VALIDATION_ERROR")
            return
        ws.send_text(self.wfile, json.dumps(reply))

    def _ws_error(self, text: str, code: str) -> None:
        ws.send_text(
            self.wfile, json.dumps({"type": "error", "data": {"message": text, "code": code}})
        )


def serve(factory: Callable[[], TerminalEnv], host: str, port: int) -> EnvServer:
    """A started server (its own thread); `shutdown()` then `server_close()` stop it and end
    every session's episode."""
    server = EnvServer((host, port), factory)
    threading.Thread(target=server.serve_forever, daemon=True, name="rl-env-serve").start()
    return server

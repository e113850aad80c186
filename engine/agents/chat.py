"""The chat-model agent: one OpenAI-compatible client parameterized by a registry entry.

The request record is built here from the body we send, never from the client's request object,
so headers (and with them the API key) cannot reach a record. Records are also scrubbed of the key
string in case an endpoint echoes it back.

Retries are ours, not the client's (`max_retries=0`), so the policy is data and every wait is
visible: 429, 408/409/425, 5xx, timeouts and refused connections are retried with exponential
backoff and jitter (honouring Retry-After), then raised as ModelEndpointError. Other 4xx answers are
not retried: a bad key or an unknown model does not fix itself.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import openai

from engine.agents import actions, unicode
from engine.agents.base import ContextLengthError, ModelEndpointError, Reply, ReplyLimits, Usage
from engine.agents.prompts import render_template
from engine.agents.registry import PLACEHOLDER_KEY, ModelConfig

if TYPE_CHECKING:
    from engine.agents.loop import Conversation

RETRY_STATUSES = frozenset({408, 409, 425, 429})
CONTEXT_ERROR = re.compile(
    r"maximum context length|context length|context_length_exceeded|context window|"
    r"prompt is too long|too many tokens|input tokens exceed",
    re.IGNORECASE,
)
# How endpoints word "no such model" when they answer 400 instead of 404 (OpenRouter does).
UNKNOWN_MODEL = re.compile(
    r"not a valid model|invalid model|unknown model|no such model|model_not_found|"
    r"model\S* (does not exist|not found)",
    re.IGNORECASE,
)
REDACTED = "[redacted]"


class _WholeRequestTimeout(Exception):
    """The answer did not arrive whole within request_timeout_s (retried like a timeout)."""


class _BodyBroken(Exception):
    """The connection broke while the body was read (retried like a refused connection)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How provider errors are retried before they end an episode as an infrastructure error."""

    max_attempts: int = 6
    base_delay_s: float = 2.0
    max_delay_s: float = 60.0
    # Each wait is scaled by a random factor in [1 - jitter, 1 + jitter].
    jitter: float = 0.25

    def delay(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        backoff = min(self.base_delay_s * 2 ** (attempt - 1), self.max_delay_s)
        backoff *= 1 + rng.uniform(-self.jitter, self.jitter)
        if retry_after_s is not None:
            backoff = max(backoff, min(retry_after_s, self.max_delay_s))
        return max(backoff, 0.0)


class ChatAgent:
    """An agent backed by a chat-completions endpoint (native tool calls or a text format)."""

    def __init__(
        self,
        config: ModelConfig,
        retry: RetryPolicy | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if config.builtin:
            raise ValueError(f"'{config.name}' is a built-in agent, not a chat model")
        self.config = config
        self.name = config.name
        self.model_id = config.model
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        key = config.api_key(environ)  # RegistryError names the missing variable
        self._secrets = [key] if key != PLACEHOLDER_KEY else []
        self._client = openai.OpenAI(
            api_key=key,
            base_url=config.base_url,
            max_retries=0,
            timeout=config.request_timeout_s,
        )

    # --- the Agent interface ----------------------------------------------------------------

    def system_message(self, prompt_text: str) -> str:
        fmt = self.config.action_format
        if fmt == "tools":
            return prompt_text
        return (
            prompt_text.rstrip("\n")
            + "\n"
            + render_template(f"actions_{fmt}", calls_per_reply=actions.CALLS_PER_REPLY)
        )

    def reply(self, conv: Conversation, limits: ReplyLimits) -> Reply:
        body = self.request_body(conv.messages, limits)
        data, latency_ms = self._post(body, limits.timeout_s)
        return self._parse(body, data, latency_ms, first_call_idx=conv.calls + 1)

    def send(self, body: dict[str, Any], timeout_s: float | None) -> tuple[Reply, float]:
        """One request outside a conversation, its calls numbered from 1 (`models check`);
        returns the reply and the latency in ms."""
        data, latency_ms = self._post(body, timeout_s)
        return self._parse(body, data, latency_ms, 1), latency_ms

    def close(self) -> None:
        self._client.close()

    # --- building the request ---------------------------------------------------------------

    def request_body(self, messages: list[dict], limits: ReplyLimits) -> dict[str, Any]:
        """Exactly the JSON body sent to /chat/completions."""
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "messages": list(messages)}
        if cfg.action_format == "tools":
            body["tools"] = [actions.BASH_TOOL]
            body["tool_choice"] = "auto"
        s = cfg.sampling
        for key in ("temperature", "top_p", "top_k", "seed"):
            value = getattr(s, key)
            if value is not None:
                body[key] = value
        max_tokens = _min_opt(s.max_tokens, limits.max_tokens)
        if max_tokens is not None:
            body["max_tokens"] = max(max_tokens, 1)
        if cfg.provider is not None:
            body["provider"] = cfg.provider.body()
        body.update(cfg.extra_body)
        return body

    # --- sending, with retries ----------------------------------------------------------------

    def _post(self, body: dict[str, Any], budget_s: float | None) -> tuple[dict, float]:
        """POST the body; returns (response JSON, latency of the successful attempt in ms)."""
        deadline = None if budget_s is None else time.monotonic() + budget_s
        extra = {k: v for k, v in body.items() if k not in ("model", "messages")}
        last = ""
        status: int | None = None
        for attempt in range(1, self.retry.max_attempts + 1):
            timeout = self.config.request_timeout_s
            if deadline is not None:
                timeout = max(min(timeout, deadline - time.monotonic()), 1.0)
            started = time.monotonic()
            retry_after = None
            try:
                status, content = self._read_within(body, extra, timeout)
                latency_ms = (time.monotonic() - started) * 1000
                data = _json_or_none(content)
                if isinstance(data, dict) and data.get("choices"):
                    return data, latency_ms
                # Some gateways answer 200 with an error object (an upstream provider failed).
                text = content.decode("utf-8", "replace")
                last = f"the endpoint answered without choices: {_short(text)}"
            except _WholeRequestTimeout:
                status = None
                last = f"no complete reply within {timeout:.0f} s"
            except _BodyBroken as exc:
                status = None
                last = f"the reply from {self.config.base_url} broke off: {exc}"
            except openai.APIStatusError as exc:
                status = exc.status_code
                message = _error_message(exc)
                if status == 400 and CONTEXT_ERROR.search(message):
                    raise ContextLengthError(self._scrub_text(message)) from None
                if status not in RETRY_STATUSES and status < 500:
                    raise ModelEndpointError(
                        self._scrub_text(_describe_status(status, message, self.config)),
                        attempt,
                        status,
                    ) from None
                last = f"HTTP {status}: {message}"
                retry_after = _retry_after(exc.response.headers)
            except openai.APITimeoutError:
                status = None
                last = f"no reply within {timeout:.0f} s"
            except openai.APIConnectionError as exc:
                status = None
                last = f"cannot reach {self.config.base_url}: {_cause(exc)}"
            if attempt == self.retry.max_attempts:
                break
            wait = self.retry.delay(attempt, retry_after, self._rng)
            if deadline is not None and time.monotonic() + wait >= deadline:
                break
            self._sleep(wait)
        raise ModelEndpointError(
            self._scrub_text(f"{last} (after {attempt} attempt(s))"), attempt, status
        )

    def _read_within(
        self, body: dict[str, Any], extra: dict[str, Any], timeout: float
    ) -> tuple[int, bytes]:
        """One POST whose whole answer must arrive within `timeout` seconds: the client's own
        timeout bounds each wait between bytes, so a body that trickles a byte at a time would
        never end; the body is streamed and the deadline checked at every chunk."""
        deadline = time.monotonic() + timeout
        with self._client.chat.completions.with_streaming_response.create(
            model=body["model"],
            messages=body["messages"],
            extra_body=extra,
            timeout=timeout,
        ) as response:
            chunks = []
            try:
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise _WholeRequestTimeout
            except _WholeRequestTimeout:
                raise
            except Exception as exc:  # the HTTP library's own errors, raised while reading
                if "timeout" in type(exc).__name__.lower():
                    raise _WholeRequestTimeout from exc
                raise _BodyBroken(f"{type(exc).__name__}: {exc}") from exc
            return response.status_code, b"".join(chunks)

    # --- reading the reply --------------------------------------------------------------------

    def _parse(self, body: dict, data: dict, latency_ms: float, first_call_idx: int) -> Reply:
        # Scrubbed before anything is read from it: an endpoint that echoes the key back must not
        # put it into the conversation or a record.
        data = self.scrub(data)
        # Lone surrogates in the text are stored as received, escaped (engine/agents/unicode.py);
        # tool arguments keep theirs until the command is run.
        data = unicode.escaped_json(data)
        choice = data["choices"][0] or {}
        message = choice.get("message") or {}
        text = _content_text(message.get("content"))
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        if not isinstance(reasoning, str):
            reasoning = json.dumps(reasoning)
        finish_reason = choice.get("finish_reason")
        usage = _usage(data.get("usage"))
        cost = _reported_cost(data.get("usage"))
        priced = cost is not None or self.config.price is not None
        if cost is None:
            cost = (
                self.config.price.cost(
                    usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens
                )
                if self.config.price
                else 0.0
            )
        if self.config.action_format == "tools":
            tool_calls = _with_ids(message.get("tool_calls") or [], first_call_idx)
            parsed = actions.parse_tool_calls(tool_calls, text)
            assistant: dict[str, Any] = {"role": "assistant", "content": text}
            if tool_calls:
                # A malformed call goes back with "{}" as its arguments: servers parse the
                # arguments of earlier calls when rendering the history, and one bad string would
                # turn every later request into a 400. The raw text stays in the response record.
                assistant["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": (call.get("function") or {}).get("name") or "",
                            "arguments": _arguments_text(call) if cmd.command is not None else "{}",
                        },
                    }
                    for call, cmd in zip(tool_calls, parsed.commands, strict=True)
                ]
                if not text:
                    assistant["content"] = None
            results_as = "tool"
        else:
            parsed = actions.parse_text_actions(text, self.config.action_format)
            assistant = {"role": "assistant", "content": text}
            results_as = "user"
        return Reply(
            assistant_message=assistant,
            text=text,
            reasoning=reasoning,
            commands=parsed.commands,
            format_error=parsed.format_error,
            finish_reason=finish_reason,
            usage=usage,
            cost_usd=cost,
            latency_ms=latency_ms,
            request=self.scrub(body),
            response=data,
            results_as=results_as,
            priced=priced,
        )

    # --- keeping secrets out of records ---------------------------------------------------------

    def scrub(self, value: Any) -> Any:
        """`value` with every occurrence of the API key replaced (recursively, in strings)."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self._scrub_text(value)
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value

    def _scrub_text(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text


# --- small helpers ----------------------------------------------------------------------------


def _min_opt(a: int | None, b: int | None) -> int | None:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return _short(str(inner["message"]))
        if isinstance(body.get("message"), str):
            return _short(body["message"])
    try:
        return _short(exc.response.text) or exc.message
    except Exception:
        return exc.message


def _describe_status(status: int, message: str, config: ModelConfig) -> str:
    if status in (401, 403):
        key = (
            f"the key in ${config.api_key_env}"
            if config.api_key_env
            else "no key (api_key_env is not set)"
        )
        return f"the endpoint {config.base_url} refused {key}: HTTP {status}: {message}"
    if status == 404 or (status == 400 and UNKNOWN_MODEL.search(message)):
        return (
            f"the endpoint {config.base_url} does not know the model id '{config.model}' "
            f"(field 'model'): HTTP {status}: {message}"
        )
    return f"the endpoint {config.base_url} rejected the request: HTTP {status}: {message}"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None


def _cause(exc: BaseException) -> str:
    # The client says only "Connection error."; the underlying cause says "refused" or "DNS".
    inner = exc.__cause__ or exc.__context__
    seen = 0
    while inner is not None and seen < 5:
        if isinstance(inner, ConnectionRefusedError) or "refused" in str(inner).lower():
            return "connection refused (is the server running?)"
        nxt = inner.__cause__ or inner.__context__
        if nxt is None:
            break
        inner, seen = nxt, seen + 1
    return str(inner or exc) or type(exc).__name__


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_int(cached),
    )


def _reported_cost(usage: Any) -> float | None:
    if isinstance(usage, dict):
        cost = usage.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            return float(cost)
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _arguments_text(call: dict) -> str:
    # Some servers send the arguments as a JSON object; the protocol's history wants a string.
    args = (call.get("function") or {}).get("arguments")
    return args if isinstance(args, str) else json.dumps(args)


def _with_ids(tool_calls: list, first_call_idx: int) -> list[dict]:
    """Tool calls with a unique id each: some servers send none or repeat them, and every tool
    message must answer exactly one call."""
    out: list[dict] = []
    seen: set[str] = set()
    for i, call in enumerate(tool_calls):
        call = dict(call) if isinstance(call, dict) else {}
        cid = str(call.get("id") or "")
        if not cid or cid in seen:
            cid = f"call_{first_call_idx + i}"
        seen.add(cid)
        call["id"] = cid
        out.append(call)
    return out

"""One judge call: the same OpenAI-compatible client the agents use (engine/agents/chat.py),
with its retries, its cost accounting and its endpoint errors, asked for a plain-text reply.

Every call sends a seed of its own, derived from the model's base seed (0 when it has none) and
what is judged, so a rerun of the same judgement sends the same request."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any

from engine.agents.base import ContextLengthError, ModelEndpointError, ReplyLimits
from engine.agents.chat import ChatAgent
from engine.agents.registry import ModelConfig, run_seed

TIMEOUT_S = 300.0


class JudgeError(RuntimeError):
    """The judge gave no reply: `kind` is infra_error (its endpoint failed: an infrastructure
    error, asked again on a rerun) or too_long (what it was to read does not fit its context)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass(frozen=True)
class JudgeReply:
    text: str
    cost_usd: float
    seed: int


def seed_for(config: ModelConfig, key: str) -> int:
    return run_seed(config.sampling.seed or 0, key, None, 0)


def ask(config: ModelConfig, system: str, user: str, key: str) -> JudgeReply:
    """The judge's reply to one system + user message; raises JudgeError for the endpoint."""
    if config.builtin:
        raise ValueError(f"'{config.name}' is a built-in agent, not a model that can judge")
    seed = seed_for(config, key)
    config = replace(config, sampling=replace(config.sampling, seed=seed))
    agent = ChatAgent(config)
    try:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        body = agent.request_body(messages, ReplyLimits())
        body.pop("tools", None)  # a judge answers in words, it runs nothing
        body.pop("tool_choice", None)
        reply, _ = agent.send(body, TIMEOUT_S)
    except ModelEndpointError as exc:
        raise JudgeError("infra_error", str(exc)) from exc
    except ContextLengthError as exc:
        raise JudgeError("too_long", str(exc)) from exc
    finally:
        agent.close()
    return JudgeReply(reply.text, reply.cost_usd, seed)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def parse_findings(text: str) -> tuple[list[dict[str, Any]], str | None]:
    """The `findings` list of the first JSON object in a reply (a ```json fence or bare), or
    ([], why) when there is none."""
    candidates = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            doc = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("findings"), list):
            return [f for f in doc["findings"] if isinstance(f, dict)], None
    return [], "the reply holds no JSON object with a 'findings' list"


def normalised(text: str) -> str:
    return " ".join(str(text).split()).lower()

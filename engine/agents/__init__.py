"""Agents and models: who answers in an episode, and the loop that drives them.

registry.py   models.toml: which agents exist and how to reach each model
registry_write.py  writing one model's entry into models.toml (`serve --register`)
chat.py       the chat-model agent (any OpenAI-compatible endpoint), retries
model_check.py  `models check`: one real request, and what is wrong when it fails
builtin.py    the oracle, nop and replay agents
actions.py    reading commands out of replies (tool calls, fenced blocks, command tags)
loop.py       run_segment: turns, budgets, limits, hooks; Conversation, EpisodeLimits, Hooks
records.py    TurnRecord, CallRecord, SegmentEnd: what the loop reports to the runner
prompts.py    system prompts and the cap/budget statements, from prompts/
serve.py      starting a vLLM server for a model and registering it
"""

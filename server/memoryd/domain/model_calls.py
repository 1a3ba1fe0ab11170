"""The record of one call to a model provider (review runs keep them in model_calls)."""

from __future__ import annotations

import dataclasses

from memoryd.domain.conversation import ConversationKey


def session_id(purpose: str, key: ConversationKey, through_id: int) -> str:
    """The tag of a model call about one conversation's messages up to `through_id`: what the
    provider's logs and the review run record show ("memory_review:…", "compaction:…")."""
    return f"{purpose}:{key.agent_id}:{key.channel}:{key.chat_id}:{key.thread_scope}:{through_id}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One call to one provider, for the record."""

    agent: str
    session_id: str
    provider: str
    model: str
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    error: str | None


def no_provider(work: str) -> str:
    """What a call needing a model is told when none is configured; `work` is what is off."""
    return (
        f"no model provider is configured, so {work} is off: add a [[memoryd.providers]] entry "
        "(name, base_url, model, api_key_env) to the config file, or run `memoryd setup`"
    )

"""The record of one call to a model provider (review runs keep them in model_calls)."""

from __future__ import annotations

import dataclasses


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

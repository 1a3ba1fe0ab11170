"""What an adapter reports about a completed turn."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TurnUsage:
    """What the provider reported for a turn (None: not reported)."""

    peak_prompt_tokens: int | None
    context_window: int | None

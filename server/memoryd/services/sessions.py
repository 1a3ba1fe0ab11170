"""`/new` (ClearConversation): review what the ending session said, then start a fresh one.

OpenHermit reviews a session before `/new` ends it, so that what was said reaches long-term
memory and the session's working memory is complete when it is kept. The review runs as
compaction's does before it moves the window: the unread user messages, in the reviewer's
batches, within review_catch_up_seconds. A review that fails or runs out of time loses nothing:
the review cursor is independent of the window, so those messages stay queued. Without a
provider, with background review off (`[memoryd.memory] enabled = false`) or in read-only mode,
`/new` does not wait for a review.
"""

from __future__ import annotations

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import Trust, require_operator
from memoryd.services.history import ClearResult, HistoryService
from memoryd.services.review import Reviewer


class Sessions:
    """Ends sessions (`/new`) over the history and the reviewer."""

    def __init__(
        self, history: HistoryService, reviewer: Reviewer, catch_up_seconds: float
    ) -> None:
        self._history = history
        self._reviewer = reviewer
        self._catch_up_seconds = catch_up_seconds

    async def new_session(self, key: ConversationKey, trust: Trust) -> ClearResult:
        """/new: review the ending session's unread input (time-bounded), then start a fresh
        window and session. Operators only."""
        require_operator(trust, "/new")
        if self._reviewer.configured and self._reviewer.settings.enabled:
            await self._reviewer.catch_up(
                key, through_id=None, seconds=self._catch_up_seconds, before="/new"
            )
        return await self._history.clear(key, trust)

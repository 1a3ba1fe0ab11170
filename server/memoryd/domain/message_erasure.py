"""What PurgeMessages may erase: messages of a conversation's current window, named by id.

A message before the window was compacted (a checkpoint summary quotes it) or closed by /new (an
ended session's working memory may); a checkpoint summary is the compactor's. Erasing one of
those alone would leave its words behind, so they are refused, and PurgeConversation erases them
with everything that quotes them.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.domain.messages import CHECKPOINT_KIND
from memoryd.errors import FailedPrecondition, InvalidArgument, Reason

# The most ids one call names.
MAX_PURGED_MESSAGES = 100


def check_purged_ids(message_ids: Sequence[int]) -> tuple[int, ...]:
    """The ids to erase, ascending and once each: at least one, at most 100, each positive."""
    if not message_ids:
        raise InvalidArgument(
            "message_ids must name at least one message",
            reason=Reason.REQUIRED,
            field="message_ids",
        )
    if len(message_ids) > MAX_PURGED_MESSAGES:
        raise InvalidArgument(
            f"message_ids has {len(message_ids)} ids; the limit is {MAX_PURGED_MESSAGES} per call",
            reason=Reason.VALUE_TOO_LONG,
            field="message_ids",
        )
    for index, message_id in enumerate(message_ids):
        if message_id <= 0:
            raise InvalidArgument(
                f"message_ids[{index}] is {message_id}; message ids are positive",
                reason=Reason.OUT_OF_RANGE,
                field=f"message_ids[{index}]",
            )
    return tuple(sorted(set(message_ids)))


def check_erasable(found: Sequence[tuple[int, str]], window_start_id: int) -> None:
    """Refuse the call when one of the messages found, (id, kind), is before the window or a
    checkpoint summary."""
    for message_id, kind in found:
        if message_id <= window_start_id:
            raise FailedPrecondition(
                f"message {message_id} is before the conversation's window (compacted, or before "
                "/new), where a checkpoint or an ended session may quote it; PurgeConversation "
                "erases it with them",
                field="message_ids",
            )
        if kind == CHECKPOINT_KIND:
            raise FailedPrecondition(
                f"message {message_id} is a checkpoint summary, the compactor's; PurgeConversation "
                "erases it with the conversation",
                field="message_ids",
            )

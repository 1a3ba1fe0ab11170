"""Which waiting messages the background embedder takes first: the live queue.

A chat writes a turn or a few at a time; a bulk load (an import, a backfill, a benchmark's load)
writes hundreds. The embedder looks at what arrived since it last looked, conversation by
conversation: the messages of a conversation that brought at most LIVE_BACKLOG of them are live,
and are embedded before the rest (the backlog, oldest first, with what the live queue leaves).
A chat appending during a bulk load of LoCoMo's 5,882 turns so gets its vectors within a step or
two of the embedder, instead of after the whole load (172 to 180 s, measured when every message
waited its turn).

The database counts each conversation's arrivals (memoryd.storage.vector_store.sort_arrivals):
after a bulk load of a million messages, each of a hundred steps sorted 10,000, and in Python
that held the interpreter lock for milliseconds a step, the event loop's among them.
"""

from __future__ import annotations

# The most messages one conversation may bring between two looks of the embedder and still be
# live.
LIVE_BACKLOG = 16
# The most arrivals the embedder sorts at a time.
ARRIVALS = 10_000

"""Whether an import is writing: the background embedder waits while one is.

An import (IngestMessages) writes as fast as the machine lets it, and the embedder, even at the
lowest CPU priority, takes the cores and caches the import's threads leave between their
wake-ups: on two cores the import ran at 0.53 to 0.67 of raw APSW's rate with the embedder
working, 0.79 to 0.83 with embeddings off (bench/ingest_throughput.py), and the writer and the
event loop spent the same per message either way. So while an import writes, the embedder
takes no batch, and the import's vectors (and those of anything written meanwhile) follow it;
searches find those messages by their words until then. An import stream counts as writing
while it is open and its last batch came within QUIET_SECONDS, so a client that leaves a
stream open without sending holds nothing back for long. Per process: with workers, an import
served by one worker does not pause the embedder of another.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

# How long after an open import stream's last batch it still counts as writing.
QUIET_SECONDS = 10.0


class ImportActivity:
    """The import streams open in this process, and when the last batch of one came."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open = 0
        self._last_batch = float("-inf")

    @contextlib.contextmanager
    def importing(self) -> Iterator[None]:
        """One import stream, open for the block."""
        self._open += 1
        self.batch()
        try:
            yield
        finally:
            self._open -= 1

    def batch(self) -> None:
        """A batch of an open stream came."""
        self._last_batch = self._clock()

    @property
    def writing(self) -> bool:
        """Whether an import is writing now (see the module docstring)."""
        return self._open > 0 and self._clock() - self._last_batch < QUIET_SECONDS

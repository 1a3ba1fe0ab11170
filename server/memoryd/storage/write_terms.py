"""What the writer takes and gives: the connection it owns and the clock it advances
(protocols a backend implements), its settings and counts, and a batch of like writes that
share one statement (memoryd.storage.writer)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from memoryd.storage.transaction import Transaction

T = TypeVar("T")
P = TypeVar("P")


class WriterConnection(Transaction, Protocol):
    """The writer's connection: a Transaction that knows whether one is open, and closes."""

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open."""
        ...

    def close(self) -> None:
        """Close the connection."""
        ...


class CommitClock(Protocol):
    """What the writer tells of each commit, where several processes share the store
    (memoryd.services.coherence): the group's version, taken in its transaction, and, after the
    commit, the version with the group's after-commit hooks to run."""

    def advance(self, transaction: Transaction) -> int:
        """The version this group commits (inside its transaction, before COMMIT)."""
        ...

    def committed(self, version: int, publish: Callable[[], None]) -> None:
        """The group committed as `version`: run `publish` (its hooks), in commit order."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class WriterSettings:
    """How the writer groups and retries."""

    max_rows: int
    max_wait_seconds: float
    attempts: int
    retry_delay_seconds: float


@dataclasses.dataclass(slots=True, kw_only=True)
class WriterStats:
    """Counters, for logs and benchmarks."""

    groups: int = 0
    jobs: int = 0
    rows: int = 0
    retries: int = 0
    failed_groups: int = 0
    # Groups committed: counted after each COMMIT, before anyone is answered.
    commits: int = 0


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Batch(Generic[P, T]):
    """A set-based kind of write: `run(transaction, payloads)` returns one result per payload,
    in order, in fewer statements than one call per payload would take."""

    name: str
    run: Callable[[Transaction, list[P]], list[T]]

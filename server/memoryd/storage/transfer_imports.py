"""An import's writes: each record stored unless the same row is there already (an import can be
run again after a cut), a row stored with other values refused (FAILED_PRECONDITION), and ids
kept as exported. memoryd.storage.transfer_store reads what an export holds."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.export_shapes import SHAPES, Kind
from memoryd.domain.messages import Role
from memoryd.domain.quoting import clipped
from memoryd.domain.resources import ResourceKey, ResourceType
from memoryd.domain.review_prompt import is_review_input
from memoryd.domain.transfer import Record, Value, conversation_of
from memoryd.errors import FailedPrecondition, InvalidArgument
from memoryd.storage import errors as database_errors
from memoryd.storage.engine import engine_of
from memoryd.storage.errors import broken_check, constraint_violated
from memoryd.storage.sql import rows, savepoint
from memoryd.storage.transaction import Transaction
from memoryd.storage.transfer_store import RESOURCE_KEY, TABLES, select_list


@dataclasses.dataclass(slots=True)
class Stored:
    """What storing a batch did: records stored and already present, by kind, and what the
    caches and files must learn after the commit."""

    stored: Counter[Kind] = dataclasses.field(default_factory=Counter)
    present: Counter[Kind] = dataclasses.field(default_factory=Counter)
    conversations: set[ConversationKey] = dataclasses.field(default_factory=set)
    memory_ids: set[int] = dataclasses.field(default_factory=set)
    resources: set[ResourceKey] = dataclasses.field(default_factory=set)
    # The stored messages by conversation: (id, whether a review reads it).
    messages: dict[ConversationKey, list[tuple[int, bool]]] = dataclasses.field(
        default_factory=dict
    )
    # Messages a review would read, stored as already reviewed (set by the import's job).
    passed_over: int = 0


def store(connection: Transaction, records: Sequence[Record]) -> Stored:
    """Store a batch of records (in file order) in the caller's transaction."""
    done = Stored()
    start = 0
    while start < len(records):
        kind = records[start].kind
        end = start
        while end < len(records) and records[end].kind is kind:
            end += 1
        _store_run(connection, kind, records[start:end], done)
        engine_of(connection).after_import(connection, TABLES[kind].table)
        start = end
    if done.stored[Kind.CONVERSATION]:
        # Versions are never reused: the counter stays above every imported conversation's.
        newest = "(SELECT coalesce(max(history_version), 0) FROM conversations)"
        connection.execute(
            f"UPDATE counters SET value = {engine_of(connection).greatest('value', newest)} "
            "WHERE name = 'history_version'"
        )
    return done


def _store_run(
    connection: Transaction, kind: Kind, records: Sequence[Record], done: Stored
) -> None:
    existing = _existing(connection, kind, records)
    new: list[Record] = []
    seen: set[tuple[Value, ...]] = set()
    for record in records:
        identity = _identity(kind, record.values)
        found = existing.get(identity)
        if found is None:
            if identity in seen:
                raise InvalidArgument(
                    f"line {record.line}: the same {kind.value} "
                    f"({_describe(kind, identity)}) as an earlier line"
                )
            seen.add(identity)
            new.append(record)
        elif found == record.values:
            done.present[kind] += 1
        else:
            raise FailedPrecondition(
                f"line {record.line}: a {kind.value} with the same identity "
                f"({_describe(kind, identity)}) is already stored with other values; import "
                "into an empty data directory, or remove the stored one first"
            )
    if not new:
        return
    _check_integers(connection, kind, new)
    # A failing INSERT changes nothing (it is undone to its savepoint); a row that fails alone
    # says why. The writer rolls back the whole job when this raises.
    try:
        with savepoint(connection, "records"):
            _insert(connection, kind, new)
    except database_errors.CONSTRAINT_ERRORS:
        for record in new:
            try:
                with savepoint(connection, "record"):
                    _insert(connection, kind, [record])
            except database_errors.CONSTRAINT_ERRORS as error:
                raise _refusal(record, error) from None
        raise  # pragma: no cover - the rows fail together but never one by one
    done.stored[kind] += len(new)
    _remember(kind, new, done)


def _existing(
    connection: Transaction, kind: Kind, records: Sequence[Record]
) -> dict[tuple[Value, ...], tuple[Value, ...]]:
    """The stored rows with the identity of one of `records`, by identity."""
    shape = SHAPES[kind]
    alias = "s" if kind is Kind.RESOURCE else "t"
    targets = ", ".join(
        f"{'s' if kind is Kind.RESOURCE_REVISION and column in RESOURCE_KEY else alias}.{column}"
        for column in shape.identity
    )
    tables = [
        "resources"
        if kind is Kind.RESOURCE or (kind is Kind.RESOURCE_REVISION and column in RESOURCE_KEY)
        else TABLES[kind].table
        for column in shape.identity
    ]
    picks = ", ".join(
        _pick(connection, table, column, index)
        for index, (table, column) in enumerate(zip(tables, shape.identity, strict=True))
    )
    wanted = json.dumps([_identity(kind, record.values) for record in records])
    found = rows(
        connection,
        f"SELECT {select_list(kind)} FROM {TABLES[kind].source} WHERE ({targets}) IN "
        f"(SELECT {picks} FROM {engine_of(connection).json_rows('?', 'j')})",
        (wanted,),
    )
    return {_identity(kind, row): tuple(row) for row in found}


def _identity(kind: Kind, values: Sequence[Value]) -> tuple[Value, ...]:
    columns = SHAPES[kind].columns
    return tuple(values[columns.index(column)] for column in SHAPES[kind].identity)


def _insert(connection: Transaction, kind: Kind, records: Sequence[Record]) -> None:
    shape = SHAPES[kind]
    columns = (*shape.columns, *shape.derived)
    picks = [
        _pick(connection, TABLES[kind].table, column, index) for index, column in enumerate(columns)
    ]
    if kind is Kind.RESOURCE_REVISION:  # the resource is named by its key
        keep = [index for index, column in enumerate(columns) if column not in RESOURCE_KEY]
        columns = (*(columns[index] for index in keep), "resource_id")
        picks = [picks[index] for index in keep]
        picks.append(
            "(SELECT id FROM resources WHERE agent_id = j.value ->> 0 "
            "AND resource_type = j.value ->> 1 AND scope_id = j.value ->> 2)"
        )
    payload = json.dumps(
        [[*record.values, *record.derived] for record in records], ensure_ascii=False
    )
    connection.execute(
        f"INSERT INTO {TABLES[kind].table} ({', '.join(columns)}) "
        f"SELECT {', '.join(picks)} FROM {engine_of(connection).json_rows('?', 'j')} "
        "ORDER BY j.key",
        (payload,),
    )


def _pick(connection: Transaction, table: str, column: str, index: int) -> str:
    """Element `index` of a JSON array row, as a value of `table`.`column`."""
    engine = engine_of(connection)
    return engine.json_pick(engine.column_types(connection).get((table, column), "text"), index)


def _check_integers(connection: Transaction, kind: Kind, records: Sequence[Record]) -> None:
    """Refuse a record whose integer column holds anything but an integer, in the same words on
    both backends (each engine's own would say it differently, or not name the column)."""
    table = TABLES[kind].table
    types = _column_types(connection)
    integers = [
        (index, column)
        for index, column in enumerate(SHAPES[kind].columns)
        if types.get((table, column)) in _INTEGER_TYPES
    ]
    for record in records:
        for index, column in integers:
            value = record.values[index]
            if value is not None and not isinstance(value, int):
                shown = clipped(value) if isinstance(value, str) else repr(value)
                raise InvalidArgument(
                    f"line {record.line}: {kind.value} record: {column} must be an integer, "
                    f"got {shown}"
                )


# The column types (as _column_types names them) that hold integers.
_INTEGER_TYPES = frozenset({"integer", "bigint", "smallint"})


def _column_types(connection: Transaction) -> dict[tuple[str, str], str]:
    """The type of every column of memoryd's tables, by (table, column)."""
    return engine_of(connection).column_types(connection)


def _remember(kind: Kind, records: Sequence[Record], done: Stored) -> None:
    for record in records:
        if kind in (Kind.CONVERSATION, Kind.MESSAGE, Kind.REVIEW_STATE, Kind.ENDED_SESSION):
            done.conversations.add(conversation_of(record))
        if kind is Kind.MESSAGE:
            read = is_review_input(Role(record.named("role")), str(record.named("metadata_json")))
            done.messages.setdefault(conversation_of(record), []).append(
                (int(record.named("id") or 0), read)
            )
        elif kind is Kind.MEMORY:
            done.memory_ids.add(int(record.named("id") or 0))
        elif kind in (Kind.RESOURCE, Kind.RESOURCE_REVISION):
            resource_type = ResourceType(record.named("resource_type"))
            done.resources.add(
                ResourceKey(
                    str(record.named("agent_id")), resource_type, str(record.named("scope_id"))
                )
            )


def _describe(kind: Kind, identity: tuple[Value, ...]) -> str:
    return ", ".join(
        f"{column} {value!r}" for column, value in zip(SHAPES[kind].identity, identity, strict=True)
    )


def _refusal(record: Record, error: Exception) -> InvalidArgument | FailedPrecondition:
    reason = constraint_violated(error)
    if reason == "unique":
        return FailedPrecondition(
            f"line {record.line}: the {record.kind.value} conflicts with a stored row "
            "(a unique key); import into an empty data directory"
        )
    if reason == "foreign key":
        return InvalidArgument(
            f"line {record.line}: the {record.kind.value} refers to a row that is neither "
            "stored nor earlier in the file (a conversation, message, job or resource)"
        )
    if reason == "check":
        table = TABLES[record.kind].table
        column = broken_check(error, table, SHAPES[record.kind].columns) or "a value"
        return InvalidArgument(
            f"line {record.line}: the {record.kind.value} cannot be stored: {column} is not "
            "a value its column allows (a CHECK constraint of the table)"
        )
    return InvalidArgument(
        f"line {record.line}: the {record.kind.value} cannot be stored: "
        + str(error).removeprefix("ConstraintError: ")
    )

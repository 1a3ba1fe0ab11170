"""The export format: what `memoryd export` writes and `memoryd import` reads back.

JSON Lines, UTF-8. The first line is the header; every other line is one record:

    {"format":"memoryd-export","version":1,"agent_id":"main","owner_id":""}
    {"record":"conversation","agent_id":"main","owner_id":"ada","channel":"telegram",...}
    {"record":"message","id":42,"agent_id":"main",...,"created_at":"2026-11-30T16:17:31.000000Z"}

A record holds every stored column of its row except those memoryd derives again on import
(search tokens, token counts, internal row numbers, a running review's claim), in a fixed order,
so exporting the same data twice gives the same bytes. Records come parents first (a
conversation before its messages, a resource before its revisions), which is also the order an
import needs. Ids, times, trust, metadata, provenance, archive state and revisions are kept as
stored: an import into an empty data directory exports again byte for byte.

Version 2 names each checkpoint resource by its owner and conversation
(memoryd.domain.resources.checkpoint_resource); version 1 named it by the conversation alone.
A version 1 file is still read: its checkpoint resources are split by owner after the import,
by the statements of migration 0009. A resource's path is never taken from a line: it is
derived from the resource's key, and a line whose path differs from it is refused, so an
import can never make memoryd write, or later erase, a file anywhere else.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from memoryd.domain.conversation import (
    ConversationKey,
    OwnerKey,
    check_identifier,
    owner_scope_token,
    search_scope_tokens,
)
from memoryd.domain.export_shapes import CONVERSATION_KEY, ORDER, SHAPES, Kind
from memoryd.domain.quoting import clipped
from memoryd.domain.resources import (
    PROMPT_FILE_NAMES,
    ResourceType,
    is_checkpoint_scope,
    prompt_file_path,
)
from memoryd.domain.tokens import count_tokens
from memoryd.errors import InvalidArgument

FORMAT = "memoryd-export"
VERSION = 2
READABLE_VERSIONS = (1, 2)
Value = str | int | float | None


@dataclasses.dataclass(frozen=True, slots=True)
class Selection:
    """What an export covers: one agent or all ("" ), one owner or all ("")."""

    agent_id: str
    owner_id: str

    @property
    def every_agent(self) -> bool:
        """Whether the export holds every agent's records."""
        return not self.agent_id


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One record of an import: its line number (1 is the header), kind and values in the
    kind's column order."""

    line: int
    kind: Kind
    values: tuple[Value, ...]
    derived: tuple[Value, ...] = ()

    def named(self, column: str) -> Value:
        """The value of one column."""
        return self.values[SHAPES[self.kind].columns.index(column)]


def selection(agent_id: str, owner_id: str) -> Selection:
    """The checked selection of an export."""
    return Selection(check_identifier(agent_id, "agent_id"), check_identifier(owner_id, "owner_id"))


def header_line(chosen: Selection) -> str:
    """The first line of an export."""
    return _encode(
        {
            "format": FORMAT,
            "version": VERSION,
            "agent_id": chosen.agent_id,
            "owner_id": chosen.owner_id,
        }
    )


def record_line(kind: Kind, values: tuple[Value, ...]) -> str:
    """One record as its line (without the newline)."""
    return _encode({"record": kind.value, **dict(zip(SHAPES[kind].columns, values, strict=True))})


@dataclasses.dataclass(frozen=True, slots=True)
class Header:
    """An export's first line: what it selected, and its format version."""

    selection: Selection
    version: int


def parse_header(line: str) -> Header:
    """Check the first line of an import."""
    document = _decode(line, 1)
    if document.get("format") != FORMAT:
        raise InvalidArgument(
            f'line 1 is not a memoryd export header: it must be {{"format": "{FORMAT}", ...}}'
        )
    version = document.get("version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise InvalidArgument(
            f"line 1: export format version {clipped(str(version))} is not supported; this "
            f"memoryd reads versions {', '.join(str(v) for v in READABLE_VERSIONS)}"
        )
    agent, owner = document.get("agent_id", ""), document.get("owner_id", "")
    if not isinstance(agent, str) or not isinstance(owner, str):
        raise InvalidArgument("line 1: agent_id and owner_id must be strings")
    return Header(selection(agent, owner), int(version))


def parse_record(line: str, number: int, previous: Kind | None, version: int = VERSION) -> Record:
    """One record line, checked: a known kind in file order, exactly its columns, scalar values,
    usable identifiers. Constraints on values (enumerations, JSON columns, references) are the
    database's, checked when the record is stored."""
    document = _decode(line, number)
    name = document.pop("record", None)
    try:
        kind = Kind(name)
    except ValueError:
        known = ", ".join(kind.value for kind in Kind)
        raise InvalidArgument(
            f"line {number}: unknown record {clipped(str(name))}; records are {known}"
        ) from None
    if previous is not None and ORDER[kind] < ORDER[previous]:
        raise InvalidArgument(
            f"line {number}: a {kind.value} record after {previous.value} records; an export "
            "lists parents first, in the order: " + ", ".join(kind.value for kind in Kind)
        )
    shape = SHAPES[kind]
    missing = [column for column in shape.columns if column not in document]
    extra = sorted(set(document) - set(shape.columns))
    if missing or extra:
        problems = [f"missing {', '.join(missing)}"] if missing else []
        problems += [f"unknown {', '.join(clipped(column) for column in extra)}"] if extra else []
        raise InvalidArgument(f"line {number}: {kind.value} record: {'; '.join(problems)}")
    values = tuple(document[column] for column in shape.columns)
    for column, value in zip(shape.columns, values, strict=True):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, str | int | float)
        ):
            raise InvalidArgument(
                f"line {number}: {kind.value} record: {column} must be a string, a number or "
                f"null, got {type(value).__name__}"
            )
        if isinstance(value, str) and "\x00" in value:
            raise InvalidArgument(
                f"line {number}: {kind.value} record: {column} contains U+0000 (NUL), which "
                "memoryd does not store"
            )
    for column in shape.identifiers:
        value = document[column]
        if not isinstance(value, str):
            raise InvalidArgument(f"line {number}: {kind.value} record: {column} must be a string")
        check_identifier(value, f"line {number}: {kind.value} record: {column}", required=True)
    channel = document.get("channel")
    if "channel" in shape.identifiers and isinstance(channel, str) and ":" in channel:
        raise InvalidArgument(
            f"line {number}: {kind.value} record: channel must not contain ':', got "
            f"{clipped(channel)}"
        )
    record = Record(number, kind, values)
    if kind in (Kind.RESOURCE, Kind.RESOURCE_REVISION):
        _check_resource(record, version)
    return dataclasses.replace(record, derived=_derived(record))


def _check_resource(record: Record, version: int) -> None:
    """A resource's type, a checkpoint's scope id of the file's version, and (for a resource)
    the path its key maps to: never another."""
    where = f"line {record.line}: {record.kind.value} record"
    try:
        resource_type = ResourceType(record.named("resource_type"))
    except ValueError:
        known = ", ".join(kind.value for kind in ResourceType)
        raise InvalidArgument(f"{where}: resource_type must be one of {known}") from None
    scope = str(record.named("scope_id"))
    if resource_type is ResourceType.CHECKPOINT:
        shape, fits = (
            ("<owner>:<channel>:<chat_id>:<thread>", is_checkpoint_scope(scope))
            if version >= VERSION
            else ("<channel>:<chat_id>:<thread>", scope.count(":") == 2)
        )
        if not fits:
            raise InvalidArgument(
                f"{where}: a version {version} checkpoint scope_id is {shape}, got {clipped(scope)}"
            )
    if record.kind is not Kind.RESOURCE:
        return
    expected = (
        prompt_file_path(str(record.named("agent_id")), scope, resource_type)
        if resource_type in PROMPT_FILE_NAMES
        else ""
    )
    if record.named("resource_path") != expected:
        raise InvalidArgument(
            f"{where}: resource_path must be {expected!r}, the path its agent, type and scope "
            "map to (memoryd derives every path; a line never chooses one), got "
            f"{clipped(str(record.named('resource_path')))}",
        )


def conversation_of(record: Record) -> ConversationKey:
    """The conversation a conversation, review state, message or review run record belongs to."""
    agent, owner, channel, chat, thread = (str(record.named(c)) for c in CONVERSATION_KEY)
    return ConversationKey(agent, owner, channel, chat, thread)


def _derived(record: Record) -> tuple[Value, ...]:
    """The values of the kind's derived columns (Shape.derived), as memoryd computes them."""
    if record.kind is Kind.CONVERSATION:
        return (search_scope_tokens(conversation_of(record)),)
    if record.kind is Kind.MESSAGE:
        content = record.named("content")
        return (count_tokens(content) if isinstance(content, str) else None,)
    if record.kind is Kind.MEMORY:
        owner = OwnerKey(str(record.named("agent_id")), str(record.named("owner_id")))
        return (owner_scope_token(owner),)
    return ()


def _encode(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _decode(line: str, number: int) -> dict[str, Any]:
    try:
        document = json.loads(line, parse_constant=_refuse_constant)
    except ValueError as error:
        raise InvalidArgument(f"line {number} is not JSON: {error}") from None
    except RecursionError:
        raise InvalidArgument(f"line {number} nests too deeply to be a record") from None
    if not isinstance(document, dict):
        raise InvalidArgument(f"line {number} must be a JSON object")
    return document


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")

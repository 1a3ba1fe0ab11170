"""LangGraph's long-term store, kept by memoryd.

    import memoryd_client as md
    from memoryd_client.integrations.langgraph import MemorydStore

    store = MemorydStore(channel=md.connect_sync(), async_channel=md.connect(), agent_id="main")
    graph = builder.compile(store=store)
    # in a node: store.put(("ada", "memories"), "diet", {"text": "Is vegetarian"})

`MemorydStore` is a `BaseStore`, whose namespaces are memoryd's owners: the label at `owner_at`
(the first, by default) names the owner, so one user's items are that owner's memory rows, of
the store's agent, and a search, a get or a listing reaches only the owner its namespace names
(a namespace without one is refused: memoryd never searches across owners). Each item is a memory
row of the owner (scope owner, category fact: in no prompt file):
- its key is `lg:` and the JSON of the namespace's other labels and the item's key (at most 256
  characters in all), so a namespace prefix is a key prefix;
- its value, what memoryd's search matches by words and meaning, is the item's text: the fields
  of `index` (the put's, else the store's), else the longest text in the item, its whitespace
  folded, cut to memoryd's 200 characters;
- its metadata (64 KiB at most) holds the item, so get and search give it back whole, and its
  created and updated times are the row's.

`search` with a query is memoryd's Recall of the owner's rows, best first, each item's `score`
its relevance (0 to 1): only items that match come back (memoryd's relevance floor), at most the
first 100; an item put with `index=False` is found by its filter, never by a query. Without a
query, items come most recently updated first. Filters compare the item's values as LangGraph's
own stores do (equality, nested objects, `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`). `delete`
erases the row (DeleteMemory). Rows memoryd learnt by itself, and other adapters' rows, are not
items. TTLs are not supported (`supports_ttl` is False): memoryd forgets only when asked.

The blocking methods (`get`, `put`, ...) run on `channel`, the async ones on `async_channel`; a
refusal of memoryd is a MemorydRefused (a ValueError) with its status.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Generator, Iterable, Mapping
from typing import Any

import grpc
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

import memoryd_client as md
from memoryd_client.integrations._kept import (
    Call,
    MemorydRefused,
    run_plan,
    run_plan_sync,
    search_query,
)

# The start of every item's row key, and the metadata member that holds the item.
KEY_PREFIX = "lg:"
METADATA_KEY = "langgraph"
# memoryd's limits: a row's value, a Recall's hits, a page of rows and one of owners.
MAX_VALUE_CHARS = 200
MAX_RECALL = 100
PAGE_SIZE = 1000
OWNERS_PAGE_SIZE = 500

# A plan of one operation's RPCs, run by memoryd_client.integrations._kept's drivers.
Plan = Generator[Call, Any, Result]


class MemorydStore(BaseStore):
    """A LangGraph BaseStore over memoryd's memory rows: namespaces name owners."""

    supports_ttl = False

    def __init__(
        self,
        *,
        channel: grpc.Channel | None = None,
        async_channel: grpc.aio.Channel | None = None,
        agent_id: str = "main",
        owner_at: int = 0,
        index: list[str] | None = None,
        trust: md.Trust.ValueType = md.TRUST_UNSPECIFIED,
    ) -> None:
        """`owner_at` is the position of the owner in every namespace; `index` the fields whose
        text memoryd searches (None: the item's longest text); `trust` is that of the writes."""
        if channel is None and async_channel is None:
            raise ValueError("a store needs a channel to memoryd: channel= or async_channel=")
        if owner_at < 0:
            raise ValueError("owner_at is a position in the namespace, from 0")
        self.agent_id = agent_id
        self.owner_at = owner_at
        self.index = index
        self.trust = trust
        self._sync = md.SyncStubs(channel) if channel is not None else None
        self._async = md.Stubs(async_channel) if async_channel is not None else None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Each operation in order, on the blocking channel."""
        if self._sync is None:
            raise RuntimeError(
                "this store was given only async_channel: its blocking methods need channel= "
                "(memoryd_client.connect_sync), or call the async ones (aget, aput, ...)"
            )
        stubs = self._sync
        return [run_plan_sync(self._plan(op), stubs) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Each operation in order, on the async channel (or the blocking one in a thread)."""
        if self._async is None:
            return await asyncio.to_thread(self.batch, list(ops))
        return [await run_plan(self._plan(op), self._async) for op in ops]

    # --- the operations, as plans of RPCs ----------------------------------------------------

    def _plan(self, op: Op) -> Plan:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"unknown operation {type(op).__name__}")

    def _get(self, op: GetOp) -> Plan:
        owner, key = self._row_key(op.namespace, op.key)
        try:
            answer = yield (
                "memory",
                "GetMemory",
                md.GetMemoryRequest(
                    owner=owner, scope_type=md.SCOPE_TYPE_OWNER, key=key, trust=self.trust
                ),
            )
        except MemorydRefused as refusal:
            if refusal.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        found = _item(answer.memory)
        if found is None:
            return None
        return Item(
            namespace=found.namespace,
            key=found.key,
            value=found.value,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    def _put(self, op: PutOp) -> Plan:
        owner, key = self._row_key(op.namespace, op.key)
        if op.value is None:
            yield (
                "memory",
                "DeleteMemory",
                md.DeleteMemoryRequest(
                    owner=owner, scope_type=md.SCOPE_TYPE_OWNER, key=key, trust=self.trust
                ),
            )
            return None
        index = self.index if op.index is None else op.index
        kept: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key, "value": op.value}
        if index is False:
            kept["index"] = False
        yield (
            "memory",
            "StoreMemory",
            md.StoreMemoryRequest(
                owner=owner,
                scope_type=md.SCOPE_TYPE_OWNER,
                category=md.CATEGORY_FACT,
                key=key,
                value=searched_text(op.value, index or None) or op.key,
                metadata=json.dumps({METADATA_KEY: kept}, ensure_ascii=False),
                trust=self.trust,
            ),
        )
        return None

    def _search(self, op: SearchOp) -> Plan:
        owner, prefix = self._key_prefix(op.namespace_prefix)
        if op.limit <= 0 or op.offset < 0:
            return []
        found: list[SearchItem] = []
        if op.query:
            answer = yield (
                "memory",
                "Recall",
                md.RecallRequest(
                    owner=owner,
                    query=search_query(op.query),
                    scope=md.RECALL_SCOPE_OWNER,
                    source=md.RECALL_SOURCE_MEMORIES,
                    limit=min(MAX_RECALL, op.offset + op.limit),
                    trust=self.trust,
                ),
            )
            for hit in answer.hits:
                item = _item(hit.memory, score=hit.scores.relevance)
                kept = _kept(hit.memory) or {}
                if (
                    item is not None
                    and hit.memory.key.startswith(prefix)
                    and kept.get("index") is not False
                    and matches(item.value, op.filter)
                ):
                    found.append(item)
        else:
            token = ""
            while len(found) < op.offset + op.limit:
                page = yield (
                    "memory",
                    "ListMemories",
                    md.ListMemoriesRequest(
                        owner=owner,
                        scope_type=md.SCOPE_TYPE_OWNER,
                        categories=[md.CATEGORY_FACT],
                        key_prefix=prefix,
                        page_size=PAGE_SIZE,
                        page_token=token,
                        trust=self.trust,
                    ),
                )
                for listed in page.memories:
                    item = _item(listed.memory, score=None)
                    if item is not None and matches(item.value, op.filter):
                        found.append(item)
                token = page.next_page_token
                if not token:
                    break
        return found[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan:
        owners = self._owners_named(op.match_conditions or ())
        if owners is None:
            owners = []
            token = ""
            while True:
                page = yield (
                    "overview",
                    "ListOwners",
                    md.ListOwnersRequest(
                        agent_id=self.agent_id, page_size=OWNERS_PAGE_SIZE, page_token=token
                    ),
                )
                owners += [summary.owner_id for summary in page.owners]
                token = page.next_page_token
                if not token:
                    break
        namespaces: set[tuple[str, ...]] = set()
        for owner_id in owners:
            token = ""
            while True:
                page = yield (
                    "memory",
                    "ListMemories",
                    md.ListMemoriesRequest(
                        owner=md.OwnerScope(agent_id=self.agent_id, owner_id=owner_id),
                        scope_type=md.SCOPE_TYPE_OWNER,
                        categories=[md.CATEGORY_FACT],
                        key_prefix=KEY_PREFIX,
                        page_size=PAGE_SIZE,
                        page_token=token,
                        preview=False,
                        trust=self.trust,
                    ),
                )
                for listed in page.memories:
                    kept = _kept(listed.memory)
                    if kept is not None:
                        namespaces.add(tuple(kept["namespace"]))
                token = page.next_page_token
                if not token:
                    break
        chosen = [
            namespace
            for namespace in namespaces
            if all(_does_match(condition, namespace) for condition in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            chosen = list({namespace[: op.max_depth] for namespace in chosen})
        return sorted(chosen)[op.offset : op.offset + op.limit]

    # --- namespaces --------------------------------------------------------------------------

    def _owner_of(self, namespace: tuple[str, ...]) -> md.OwnerScope:
        if len(namespace) <= self.owner_at or not namespace[self.owner_at].strip():
            raise InvalidNamespaceError(
                f"namespace {namespace!r} names no owner: memoryd keeps each owner's items "
                f"apart, and this store reads the owner at position {self.owner_at}"
            )
        return md.OwnerScope(agent_id=self.agent_id, owner_id=namespace[self.owner_at])

    def _labels(self, namespace: tuple[str, ...]) -> list[str]:
        return [label for i, label in enumerate(namespace) if i != self.owner_at]

    def _row_key(self, namespace: tuple[str, ...], key: str) -> tuple[md.OwnerScope, str]:
        owner = self._owner_of(namespace)
        return owner, KEY_PREFIX + _json([*self._labels(namespace), key])

    def _key_prefix(self, namespace_prefix: tuple[str, ...]) -> tuple[md.OwnerScope, str]:
        owner = self._owner_of(namespace_prefix)
        labels = self._labels(namespace_prefix)
        # '["a","b",' is the start of every key under ("a", "b"); '[' of every key.
        return owner, KEY_PREFIX + (_json(labels)[:-1] + "," if labels else "[")

    def _owners_named(self, conditions: Iterable[MatchCondition]) -> list[str] | None:
        """The owner a prefix condition fixes, or None (every owner of the agent)."""
        for condition in conditions:
            path = condition.path
            if (
                condition.match_type == "prefix"
                and len(path) > self.owner_at
                and path[self.owner_at] != "*"
            ):
                return [path[self.owner_at]]
        return None


def searched_text(value: Mapping[str, Any], fields: list[str] | None) -> str:
    """The text memoryd searches an item by: its `fields` (dotted paths) joined, or its longest
    text; whitespace folded, at most 200 characters."""
    if fields:
        texts = [text for field in fields for text in _texts(_at(value, field.split(".")))]
    else:
        texts = sorted(_texts(value), key=len, reverse=True)[:1]
    folded = " ".join(" ".join(texts).split())
    return folded[:MAX_VALUE_CHARS].strip()


def matches(value: dict[str, Any], condition: dict[str, Any] | None) -> bool:
    """Whether an item's value passes a filter, as LangGraph's stores compare."""
    return not condition or all(_compare(value.get(key), want) for key, want in condition.items())


def _compare(value: Any, want: Any) -> bool:
    if isinstance(want, dict):
        if any(key.startswith("$") for key in want):
            return all(_operator(value, operator, operand) for operator, operand in want.items())
        return isinstance(value, dict) and all(
            _compare(value.get(key), inner) for key, inner in want.items()
        )
    if isinstance(want, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(want)
            and all(_compare(v, w) for v, w in zip(value, want, strict=True))
        )
    return bool(value == want)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"unsupported filter operator {operator!r}")
    try:
        left, right = float(value), float(operand)
    except (TypeError, ValueError):
        return False  # a value that is no number is not greater, nor less
    return {
        "$gt": left > right,
        "$gte": left >= right,
        "$lt": left < right,
        "$lte": left <= right,
    }[operator]


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(want in ("*", label) for label, want in pairs)


def _item(memory: md.Memory, score: float | None = None) -> SearchItem | None:
    kept = _kept(memory)
    if kept is None:
        return None
    return SearchItem(
        namespace=tuple(kept["namespace"]),
        key=kept["key"],
        value=kept["value"],
        created_at=_time(memory.created_at),
        updated_at=_time(memory.updated_at),
        score=score,
    )


def _kept(memory: md.Memory) -> dict[str, Any] | None:
    try:
        kept = json.loads(memory.metadata or "{}").get(METADATA_KEY)
    except (ValueError, AttributeError):
        return None
    if not isinstance(kept, dict) or not memory.key.startswith(KEY_PREFIX):
        return None
    return kept


def _time(stamp: Any) -> dt.datetime:
    return stamp.ToDatetime(tzinfo=dt.UTC)  # type: ignore[no-any-return]


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        return [text for member in value.values() for text in _texts(member)]
    if isinstance(value, list | tuple):
        return [text for member in value for text in _texts(member)]
    return []


def _at(value: Any, path: list[str]) -> Any:
    for step in path:
        if step == "*" and isinstance(value, list):
            return value
        value = value.get(step) if isinstance(value, dict) else None
    return value


def _json(labels: list[str]) -> str:
    return json.dumps(labels, ensure_ascii=False, separators=(",", ":"))


# Item is part of what the module answers (get's result).
__all__ = ["Item", "MemorydStore", "matches", "searched_text"]

"""The OpenAI Agents SDK's memory, kept by memoryd.

    import memoryd_client as md
    from memoryd_client.integrations.openai_agents import MemorydSession, memory_tools

    async with md.connect("127.0.0.1:50051") as channel:
        session = MemorydSession(channel, "chat-42", owner_id="ada")
        agent = Agent(name="assistant", tools=memory_tools(session))
        await Runner.run(agent, "I'm vegetarian", session=session)

`MemorydSession` is a `Session` (the SDK's protocol): a session is a conversation of one owner
(channel "openai-agents", chat_id the session id, or the Conversation given), and each item of
the run is one message of it, committed before `add_items` returns:
- a message item (user, assistant, system, developer) is a chat message with its text as the
  content, so memoryd's review learns from what the user said, search finds it and
  ComposeContext sees it; a tool call, its output and reasoning are messages of their own kinds
  (`openai_function_call`, ...), which the review does not read;
- the item itself, its longest text left out, is the message's metadata (`openai_agents`), so
  `get_items` gives back each item as it was added;
- `get_items` reads the conversation's window, oldest first; `pop_item` erases the newest
  message (PurgeMessages: it is gone from history and search, not only from the session);
  `clear_session` is `/new`: a fresh window, the earlier items kept in history (searchable, and
  reviewed first); `purge_session` erases them all (PurgeConversation).

Messages that memoryd or another adapter put in the conversation (a compaction's summary, an
adapter's turn) are given back as plain message items of their role.

`memory_tools` are the SDK's function tools over memoryd's long-term memory, for one owner the
application chooses (the model cannot name another): `remember` a durable fact (USER.md or
MEMORY.md), `recall` what is known. A refusal of memoryd becomes the tool's error, which the SDK
hands to the model.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, cast

import grpc
from agents import RunContextWrapper, Tool, default_tool_error_function, function_tool
from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import resolve_session_limit

import memoryd_client as md
from memoryd_client.integrations._kept import (
    MemorydRefused,
    Reread,
    batches,
    called,
    kept_item,
    kept_metadata,
    run_plan,
    split_text,
    window_plan,
)

CHANNEL = "openai-agents"
# The metadata member that holds the item.
METADATA_KEY = "openai_agents"
_ROLES = {
    "user": md.ROLE_USER,
    "assistant": md.ROLE_ASSISTANT,
    "system": md.ROLE_SYSTEM,
    "developer": md.ROLE_SYSTEM,
}
_ROLE_NAMES = {
    md.ROLE_USER: "user",
    md.ROLE_ASSISTANT: "assistant",
    md.ROLE_SYSTEM: "system",
    md.ROLE_TOOL: "assistant",
}
# The roles a plain message item reads back as (developer is stored as system).
_PLAIN_ROLES = frozenset({"user", "assistant", "system"})
# Tries of pop_item when another caller erases the newest message first.
_POP_TRIES = 5


class MemorydSession:
    """A Session of the OpenAI Agents SDK kept in memoryd: one conversation's window."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        session_id: str,
        *,
        owner_id: str = "default",
        agent_id: str = "main",
        conversation: md.Conversation | None = None,
        user_trust: md.Trust.ValueType = md.TRUST_UNSPECIFIED,
        session_settings: SessionSettings | None = None,
    ) -> None:
        """`session_id` names the conversation (chat_id, in channel "openai-agents") unless
        `conversation` is given. `user_trust` is the trust of what the user says
        (TRUST_GUEST for a stranger in a public bot; unset: the operator)."""
        self.session_id = session_id
        self.session_settings = session_settings
        self.conversation = conversation or md.Conversation(
            agent_id=agent_id, owner_id=owner_id, channel=CHANNEL, chat_id=session_id
        )
        self.user_trust = user_trust
        self.stubs = md.Stubs(channel)
        # Each read's items are its own, nested members too (as SQLiteSession's): a message is
        # decoded once, then each read is given new objects (_Held).
        self._reread: Reread[_Held, TResponseInputItem] = Reread(_held, _fresh)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The window's items, oldest first; with a limit, the newest `limit` of them."""
        limit = resolve_session_limit(limit, self.session_settings)
        return self._reread(await run_plan(window_plan(self.conversation, limit), self.stubs))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, in order; answered once memoryd has committed them (each batch
        of 100 at once)."""
        for batch in batches([self._message_of(item) for item in items]):
            await called(
                self.stubs.conversations.AppendMessages(
                    md.AppendMessagesRequest(conversation=self.conversation, messages=batch)
                )
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Erase the newest item of the window and return it; None when the window is empty.
        The message is erased from memoryd (PurgeMessages), not only from the session."""
        for _ in range(_POP_TRIES):
            newest = await run_plan(window_plan(self.conversation, 1), self.stubs)
            if not newest:
                return None
            purged = await called(
                self.stubs.conversations.PurgeMessages(
                    md.PurgeMessagesRequest(
                        conversation=self.conversation, message_ids=[newest[0].id]
                    )
                )
            )
            if newest[0].id in purged.purged_message_ids:
                return item_of(newest[0])
        raise RuntimeError(f"the newest item of session {self.session_id!r} kept changing")

    async def clear_session(self) -> None:
        """/new: a fresh, empty window. The items stay in memoryd's history (searchable, and
        reviewed first); purge_session erases them."""
        await called(
            self.stubs.conversations.ClearConversation(
                md.ClearConversationRequest(conversation=self.conversation)
            )
        )

    async def purge_session(self) -> None:
        """Erase the conversation: every item, and the notes kept for it."""
        await called(
            self.stubs.conversations.PurgeConversation(
                md.PurgeConversationRequest(conversation=self.conversation)
            )
        )

    def _message_of(self, item: TResponseInputItem) -> md.NewMessage:
        raw = dict(item)
        role_name = raw.get("role")
        kind = "chat_message"
        if isinstance(role_name, str) and role_name in _ROLES:
            role = _ROLES[role_name]
            sender = role_name
            if role == md.ROLE_USER:
                sender = self.conversation.owner_id or "user"
        else:
            item_type = str(raw.get("type") or "item")
            role = md.ROLE_TOOL if item_type.endswith("_output") else md.ROLE_ASSISTANT
            kind = _kind_of(item_type)
            sender = str(raw.get("name") or ("tool" if role == md.ROLE_TOOL else "assistant"))
        text, shape = split_text(raw)
        # A plain message item ({"role", "content"}) is its role and text: nothing to keep.
        plain = (
            set(raw) == {"role", "content"}
            and role_name in _PLAIN_ROLES
            and shape.get("text_at") == ["content"]
        )
        return md.NewMessage(
            sender=sender[:256],
            role=role,
            kind=kind,
            content=text,
            metadata="" if plain else kept_metadata(METADATA_KEY, shape),
            trust=self.user_trust if role == md.ROLE_USER else md.TRUST_UNSPECIFIED,
        )


def item_of(message: md.Message) -> TResponseInputItem:
    """The item a message holds: the one added, or a message item of its role and text."""
    item = kept_item(message, METADATA_KEY) or {
        "role": _ROLE_NAMES.get(message.role, "user"),
        "content": message.content,
    }
    return cast("TResponseInputItem", item)


# What a session holds of a message it decoded: a plain item's role and text, or the kept
# item's JSON text.
_Held = tuple[str, str] | str
_DECODER = json.JSONDecoder()


def _held(message: md.Message) -> _Held:
    item = kept_item(message, METADATA_KEY)
    if item is None:
        return (_ROLE_NAMES.get(message.role, "user"), message.content)
    return json.dumps(item, ensure_ascii=False)


def _fresh(held: _Held) -> TResponseInputItem:
    """New objects of an item (JSON's own decoder, without json.loads' checks of a text that
    json.dumps wrote)."""
    if isinstance(held, tuple):
        return cast("TResponseInputItem", {"role": held[0], "content": held[1]})
    return cast("TResponseInputItem", _DECODER.raw_decode(held)[0])


def _kind_of(item_type: str) -> str:
    """A message kind for an item type: lowercase letters, digits and '_', at most 64."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in item_type)
    return f"openai_{cleaned.lower()}"[:64]


# --- the memory tools -------------------------------------------------------------------------

Category = Literal["identity", "preference", "interest", "goal", "context", "directive"]
_CATEGORIES: dict[str, md.Category.ValueType] = {
    "identity": md.CATEGORY_IDENTITY,
    "preference": md.CATEGORY_PREFERENCE,
    "interest": md.CATEGORY_INTEREST,
    "goal": md.CATEGORY_GOAL,
    "context": md.CATEGORY_CONTEXT,
    "directive": md.CATEGORY_DIRECTIVE,
}


def key_of(category: str, fact: str) -> str:
    """A key for a fact remembered without one: the same fact, the same key (as `memoryd mcp`
    makes them)."""
    return f"{category}_{hashlib.sha256(fact.strip().lower().encode()).hexdigest()[:12]}"


def memory_tools(session: MemorydSession, *, trust: md.Trust.ValueType | None = None) -> list[Tool]:
    """`remember` and `recall` over the long-term memory of the session's owner, learnt in its
    conversation. The owner is the application's choice: no argument of the model names one.
    Writes carry `trust` (default: the session's user trust)."""
    stubs = session.stubs
    conversation = session.conversation
    writes = session.user_trust if trust is None else trust

    @function_tool(failure_error_function=refusal_for_the_model)
    async def remember(fact: str, category: Category, key: str = "") -> str:
        """Remember a durable fact about the user or their work: it reaches every later
        conversation with them. Use it for what stays true (a name, a diet, a goal).

        Args:
            fact: The fact, as it should read in the prompt, e.g. "Is vegetarian".
            category: About the user: identity, preference, interest, goal. About their work:
                context; directive, a standing rule for you (only the operator sets one).
            key: A short stable name, e.g. "diet": remembering the same key again replaces
                the fact. Empty: a key made from the fact.
        """
        stored = await called(
            stubs.memory.StoreMemory(
                md.StoreMemoryRequest(
                    conversation=conversation,
                    category=_CATEGORIES[category],
                    key=key or key_of(category, fact),
                    value=fact,
                    trust=writes,
                )
            )
        )
        return json.dumps(
            {"remembered": {"key": stored.memory.key, "value": stored.memory.value}},
            ensure_ascii=False,
        )

    @function_tool(failure_error_function=refusal_for_the_model)
    async def recall(query: str, limit: int = 10) -> str:
        """Search what is known about the user (remembered facts and notes) by words and
        meaning, best first. No hits means nothing known matches: say so rather than guess.

        Args:
            query: What to look for, in the user's words.
            limit: How many hits at most (1 to 100).
        """
        found = await called(
            stubs.memory.Recall(
                md.RecallRequest(
                    conversation=conversation,
                    query=query,
                    scope=md.RECALL_SCOPE_ALL,
                    source=md.RECALL_SOURCE_MEMORIES,
                    limit=limit,
                )
            )
        )
        hits = [
            {
                "key": hit.memory.key,
                "value": hit.memory.value,
                "category": md.Category.Name(hit.memory.category).removeprefix("CATEGORY_").lower(),
                "relevance": round(hit.scores.relevance, 3),
                # Guest text is what a guest said, never an instruction.
                "trust": "guest" if hit.memory.trust == md.TRUST_GUEST else "operator",
            }
            for hit in found.hits
        ]
        return json.dumps({"hits": hits}, ensure_ascii=False)

    return [remember, recall]


def refusal_for_the_model(context: RunContextWrapper[Any], error: Exception) -> str:
    """What the model reads when a tool fails: memoryd's refusal (it says what was wrong, and
    holds no secret), or the SDK's own words for anything else."""
    if isinstance(error, MemorydRefused):
        return str(error)
    return default_tool_error_function(context, error)

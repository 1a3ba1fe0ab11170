"""LangChain's chat message history over memoryd (memoryd_client.integrations.langchain), through
LangChain's own RunnableWithMessageHistory and ChatOpenAI against a real memoryd, the model being
a local chat-completions server with scripted answers: a chain's turns are a conversation's
messages, the next turn is sent them, every method answers as LangChain's own in-memory history
does, and two users' histories never meet."""

from __future__ import annotations

import uuid
import warnings
from typing import Any

import grpc
import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_openai import ChatOpenAI

import memoryd_client as md
from memoryd.testing.fake_model import FakeModel
from memoryd_client.integrations._kept import MemorydRefused
from memoryd_client.integrations.langchain import MemorydChatMessageHistory
from tests.helpers import load_example, sent_text

# On both backends: histories are conversations.
pytestmark = pytest.mark.storage


def owner() -> str:
    return f"ada-{uuid.uuid4().hex[:8]}"


example = load_example("langchain_history")


def llm(model: FakeModel) -> ChatOpenAI:
    return ChatOpenAI(model="fake-model", base_url=model.base_url, api_key="unused")  # type: ignore[arg-type]


def chain(model: FakeModel, history_of: Any) -> Runnable[Any, Any]:
    """The example's chat on the fake, with these histories."""
    talk: Runnable[Any, Any] = example.chat(llm(model), history_of)
    return talk


def config_of(user: str, session: str) -> RunnableConfig:
    return {"configurable": {"user_id": user, "session_id": session}}


async def stored(channel: grpc.aio.Channel, history: MemorydChatMessageHistory) -> list[md.Message]:
    listed = await md.Stubs(channel).conversations.ListMessages(
        md.ListMessagesRequest(conversation=history.conversation, all_history=True)
    )
    return list(listed.messages)


async def test_a_chain_s_turns_are_the_conversation_and_the_next_turn_is_sent_them(
    blocking: grpc.Channel, channel: grpc.aio.Channel, model: FakeModel
) -> None:
    ada = owner()
    history_of = example.histories(blocking)
    talk = chain(model, history_of)
    config = config_of(ada, "chat-1")
    model.reply("Hello Ada.")
    answer = talk.invoke({"question": "Hi, I'm Ada and I'm vegetarian."}, config=config)
    assert answer.content == "Hello Ada."
    model.reply("You are vegetarian.")
    talk.invoke({"question": "What do I eat?"}, config=config)
    sent = sent_text(model.requests[-1])
    assert "Hi, I'm Ada and I'm vegetarian." in sent
    assert "Hello Ada." in sent

    messages = await stored(channel, history_of(ada, "chat-1"))
    assert [(m.role, m.kind, m.sender, m.content) for m in messages] == [
        (md.ROLE_USER, "chat_message", ada, "Hi, I'm Ada and I'm vegetarian."),
        (md.ROLE_ASSISTANT, "chat_message", "assistant", "Hello Ada."),
        (md.ROLE_USER, "chat_message", ada, "What do I eat?"),
        (md.ROLE_ASSISTANT, "chat_message", "assistant", "You are vegetarian."),
    ]
    # A message of text alone keeps nothing more; the model's answer keeps its metadata.
    assert messages[0].metadata == "{}"
    assert '"response_metadata"' in messages[1].metadata


async def test_the_async_chain_on_the_async_channel(
    channel: grpc.aio.Channel, model: FakeModel
) -> None:
    ada = owner()

    def history_of(user_id: str, session_id: str) -> MemorydChatMessageHistory:
        return MemorydChatMessageHistory(session_id, async_channel=channel, owner_id=user_id)

    talk = chain(model, history_of)
    config = config_of(ada, "chat-a")
    model.reply("Noted.")
    await talk.ainvoke({"question": "My sister is Inês."}, config=config)
    model.reply("Inês.")
    await talk.ainvoke({"question": "Who is my sister?"}, config=config)
    assert "My sister is Inês." in sent_text(model.requests[-1])
    messages = await history_of(ada, "chat-a").aget_messages()
    assert [m.content for m in messages] == [
        "My sister is Inês.",
        "Noted.",
        "Who is my sister?",
        "Inês.",
    ]
    with pytest.raises(RuntimeError, match="need channel="):
        _ = history_of(ada, "chat-a").messages
    with pytest.raises(ValueError, match="needs a channel"):
        MemorydChatMessageHistory("x")


def varied() -> list[BaseMessage]:
    return [
        SystemMessage("Be brief."),
        HumanMessage("Book a table — 東京 🍣", id="m1"),
        AIMessage(
            "",
            tool_calls=[{"name": "book", "args": {"where": "Tokyo", "people": 2}, "id": "c1"}],
        ),
        ToolMessage("booked: table 7", tool_call_id="c1", name="book"),
        AIMessage(
            [{"type": "text", "text": "Booked"}, {"type": "text", "text": ", table seven."}],
            additional_kwargs={"refusal": None},
            response_metadata={"model_name": "fake"},
        ),
        HumanMessage("   "),
    ]


async def test_every_method_answers_as_langchain_s_in_memory_history(
    blocking: grpc.Channel, channel: grpc.aio.Channel
) -> None:
    ours = MemorydChatMessageHistory(
        "chat-" + uuid.uuid4().hex[:8], channel=blocking, async_channel=channel, owner_id=owner()
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated as the base class is, and the reference
        theirs = InMemoryChatMessageHistory()
    for history in (ours, theirs):
        history.add_messages(varied())
        history.add_user_message("plain text")
        history.add_ai_message("plain answer")
    assert ours.messages == theirs.messages
    assert await ours.aget_messages() == await theirs.aget_messages()
    assert str(ours) == str(theirs)
    # Each read's messages are its own (decoded once, each read given copies): changing one
    # changes no later read.
    handed = ours.messages
    assert handed[0] is not ours.messages[0]
    handed[0].content = "changed"
    assert ours.messages == theirs.messages
    ours.clear()
    theirs.clear()
    assert ours.messages == theirs.messages == []
    for history in (ours, theirs):
        await history.aadd_messages([HumanMessage("after clear")])
    assert await ours.aget_messages() == await theirs.aget_messages()
    await ours.aclear()
    await theirs.aclear()
    assert await ours.aget_messages() == []

    # Cleared is /new: memoryd keeps the earlier messages, with their kinds.
    kinds = [(m.kind, m.content) for m in await stored(channel, ours)]
    assert ("langchain_tool_call", "[ai]") in kinds
    assert ("langchain_tool", "booked: table 7") in kinds
    assert ("chat_message", ", table seven.") in kinds
    await ours.apurge()
    assert await stored(channel, ours) == []


async def test_what_another_adapter_said_reads_as_messages_of_its_role(
    blocking: grpc.Channel, channel: grpc.aio.Channel
) -> None:
    history = MemorydChatMessageHistory("shared", channel=blocking, owner_id=owner())
    await md.Stubs(channel).conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=history.conversation,
            messages=[md.user("ada", "from Telegram"), md.assistant("assistant", "answered")],
        )
    )
    assert history.messages == [HumanMessage("from Telegram"), AIMessage("answered")]


async def test_a_refused_batch_stores_nothing_and_says_why(blocking: grpc.Channel) -> None:
    history = MemorydChatMessageHistory("big", channel=blocking, owner_id=owner())
    history.add_user_message("kept")
    with pytest.raises(MemorydRefused) as refused:
        history.add_messages([HumanMessage("lost"), HumanMessage("x" * (300 * 1024))])
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [m.content for m in history.messages] == ["kept"]


async def test_two_users_with_the_same_session_id_have_two_histories(
    blocking: grpc.Channel, model: FakeModel
) -> None:
    ada, ben = owner(), owner()
    history_of = example.histories(blocking)
    talk = chain(model, history_of)
    model.reply("Noted, Porto.")
    talk.invoke(
        {"question": "I live in Porto."},
        config=config_of(ada, "same"),
    )
    model.reply("I don't know.")
    talk.invoke(
        {"question": "Where do I live?"},
        config=config_of(ben, "same"),
    )
    assert "Porto" not in sent_text(model.requests[-1])
    assert [m.content for m in history_of(ben, "same").messages] == [
        "Where do I live?",
        "I don't know.",
    ]

"""LlamaIndex's memory over memoryd (memoryd_client.integrations.llama_index): a memory block of
LlamaIndex's own `Memory`, driven by its SimpleChatEngine against a real memoryd, the model being
a local chat-completions server with scripted answers: what memoryd knows of the user reaches
the model's system message, what Memory flushes from its short-term queue lands in memoryd as
the conversation, and one user's block never shows another's facts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import CustomLLM
from llama_index.core.memory import Memory
from openai import OpenAI

import memoryd_client as md
from memoryd.testing.fake_model import FakeModel
from memoryd_client.integrations._kept import MemorydRefused
from memoryd_client.integrations.llama_index import MemorydMemoryBlock
from tests.helpers import load_example

# On both backends: the block reads memory rows and writes messages.
pytestmark = pytest.mark.storage

example = load_example("llama_index_memory")


class ChatCompletions(CustomLLM):
    """A LlamaIndex LLM on a chat-completions server (the fake): the prompt as one message."""

    base_url: str

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=8000, num_output=256, model_name="fake-model")

    def complete(
        self,
        prompt: str,
        formatted: bool = False,  # noqa: ARG002 - LlamaIndex's signature
        **kwargs: Any,  # noqa: ARG002
    ) -> CompletionResponse:
        client = OpenAI(base_url=self.base_url, api_key="unused")
        answer = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": prompt}]
        )
        return CompletionResponse(text=answer.choices[0].message.content or "")

    def stream_complete(
        self,
        prompt: str,
        formatted: bool = False,
        **kwargs: Any,
    ) -> CompletionResponseGen:
        raise NotImplementedError


def prompt_of(model: FakeModel) -> str:
    return str(model.requests[-1]["messages"][0]["content"])


def remembered(channel: grpc.Channel, agent: str, owner: str, value: str, **fields: Any) -> None:
    md.SyncStubs(channel).memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=md.OwnerScope(agent_id=agent, owner_id=owner), value=value, **fields
        )
    )


def test_what_memoryd_knows_reaches_the_model_and_flushed_turns_reach_memoryd(
    blocking: grpc.Channel, model: FakeModel
) -> None:
    agent = f"li-{uuid.uuid4().hex[:8]}"
    remembered(blocking, agent, "ada", "Is vegetarian", category=md.CATEGORY_PREFERENCE, key="diet")
    remembered(
        blocking,
        agent,
        "ada",
        "Locker code 4417",
        category=md.CATEGORY_FACT,
        key="locker",
        scope_type=md.SCOPE_TYPE_OWNER,
    )
    llm = ChatCompletions(base_url=model.base_url)
    # A small queue: the first turns are flushed to the blocks as the chat goes on.
    engine: SimpleChatEngine = example.chat_engine(
        llm, blocking, user="ada", session="s1", agent=agent, token_limit=60
    )
    for said, answer in (
        ("Hi, I am Ada and I work on the billing rewrite all week long.", "Hello Ada."),
        ("What is my locker code, again?", "It is 4417."),
        ("Thanks a lot, and what do I eat?", "Vegetables."),
    ):
        model.reply(answer)
        assert str(engine.chat(said)) == answer
    prompt = prompt_of(model)
    assert "Is vegetarian" in prompt  # USER.md
    second = str(model.requests[1]["messages"][0]["content"])
    assert "Locker code 4417" in second  # a fact that matches the user's words

    listed = md.SyncStubs(blocking).conversations.ListMessages(
        md.ListMessagesRequest(
            conversation=md.Conversation(
                agent_id=agent, owner_id="ada", channel="llama-index", chat_id="s1"
            )
        )
    )
    flushed = [(m.role, m.sender, m.content) for m in listed.messages]
    assert flushed[:2] == [
        (md.ROLE_USER, "ada", "Hi, I am Ada and I work on the billing rewrite all week long."),
        (md.ROLE_ASSISTANT, "assistant", "Hello Ada."),
    ]

    # Ben's block, on the same agent: none of Ada's facts.
    model.reply("I don't know.")
    ben = example.chat_engine(llm, blocking, user="ben", session="s1", agent=agent)
    ben.chat("What is my locker code and what do I eat?")
    assert "4417" not in prompt_of(model)
    assert "vegetarian" not in prompt_of(model)


def test_the_block_alone_as_memory_calls_it(blocking: grpc.Channel) -> None:
    agent = f"li-{uuid.uuid4().hex[:8]}"
    remembered(blocking, agent, "ada", "Lives in Porto", category=md.CATEGORY_IDENTITY, key="city")
    block = MemorydMemoryBlock(channel=blocking, owner_id="ada", agent_id=agent)
    content = asyncio.run(block.aget([ChatMessage(role="user", content="Where do I live?")]))
    assert "Lives in Porto" in content
    # Truncated, the matching facts go first, then everything.
    remembered(
        blocking,
        agent,
        "ada",
        "Porto flat on Rua Alegre",
        category=md.CATEGORY_FACT,
        key="flat",
        scope_type=md.SCOPE_TYPE_OWNER,
    )
    content = asyncio.run(block.aget([ChatMessage(role="user", content="my Porto flat")]))
    assert "Facts that match" in content
    shorter = asyncio.run(block.atruncate(content, 10))
    assert shorter is not None
    assert "Rua Alegre" not in shorter
    assert "Lives in Porto" in shorter
    assert asyncio.run(block.atruncate(shorter, 10)) is None
    # Another owner's block: nothing.
    other = MemorydMemoryBlock(channel=blocking, owner_id="ben", agent_id=agent)
    assert asyncio.run(other.aget([ChatMessage(role="user", content="Porto flat")])) == ""


def test_refusals_and_a_wrong_channel_say_what_is_wrong(blocking: grpc.Channel) -> None:
    with pytest.raises(TypeError, match="blocking channel"):
        MemorydMemoryBlock(channel="127.0.0.1:50051")
    block = MemorydMemoryBlock(channel=blocking, owner_id=" ada")
    with pytest.raises(MemorydRefused) as refused:
        asyncio.run(block.aget([]))
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    memory = Memory.from_defaults(session_id="x", token_limit=40, memory_blocks=[block])
    # Flushing the short-term queue hands the block messages it cannot record.
    with pytest.raises(MemorydRefused):
        memory.put_messages([ChatMessage(role="user", content="hello " * 40)] * 3)

"""A LangChain chat whose history is memoryd's: RunnableWithMessageHistory reads each user's
conversation from memoryd before a turn and appends the turn after it, so memoryd's review learns
from it and any adapter can search it. Each line of stdin is a user turn.

    pip install "memoryd-client[langchain]" langchain-openai
    OPENAI_API_KEY=... python clients/python/examples/langchain_history.py --user ada

Any OpenAI-compatible endpoint works too: OPENAI_BASE_URL and OPENAI_MODEL. memoryd is at
--address (default $MEMORYD_ADDRESS or 127.0.0.1:50051), with $MEMORYD_TOKEN when it has tokens.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import grpc
from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import ConfigurableFieldSpec, Runnable, RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_openai import ChatOpenAI

import memoryd_client as md
from memoryd_client.integrations.langchain import MemorydChatMessageHistory


def histories(channel: grpc.Channel) -> Callable[[str, str], MemorydChatMessageHistory]:
    """A user's history of a session: memoryd's conversation of that owner."""

    def history_of(user_id: str, session_id: str) -> MemorydChatMessageHistory:
        return MemorydChatMessageHistory(session_id, channel=channel, owner_id=user_id)

    return history_of


def chat(llm: BaseChatModel, history_of: Callable[..., Any]) -> Runnable[Any, Any]:
    """The prompt and the model, with each (user_id, session_id)'s history around them."""
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are a helpful assistant."),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangChain deprecates it since 1.6.4; still in use
        return RunnableWithMessageHistory(
            prompt | llm,
            history_of,
            input_messages_key="question",
            history_messages_key="history",
            history_factory_config=[
                ConfigurableFieldSpec(id="user_id", annotation=str),
                ConfigurableFieldSpec(id="session_id", annotation=str),
            ],
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", md.DEFAULT_ADDRESS))
    parser.add_argument("--user", default="default", help="whose conversation it is")
    parser.add_argument("--session", default="main", help="the conversation of that user")
    args = parser.parse_args()
    llm = ChatOpenAI(
        model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL"),
    )
    with md.connect_sync(args.address, token=os.environ.get("MEMORYD_TOKEN")) as channel:
        talk = chat(llm, histories(channel))
        config: RunnableConfig = {
            "configurable": {"user_id": args.user, "session_id": args.session}
        }
        for line in sys.stdin:
            if line.strip():
                answer = talk.invoke({"question": line.strip()}, config=config)
                print(answer.content, flush=True)  # noqa: T201 - the example's output
    return 0


if __name__ == "__main__":
    sys.exit(main())

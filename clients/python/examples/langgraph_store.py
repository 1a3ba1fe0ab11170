"""A LangGraph agent whose long-term memory is memoryd's: each user's facts are that user's memory
rows, found by meaning in any later thread. A line of stdin that starts with "remember:" is kept;
every line is answered with what is known. `--user` chooses whose memory it is.

    pip install "memoryd-client[langgraph]" langchain-openai
    OPENAI_API_KEY=... python clients/python/examples/langgraph_store.py --user ada

Any OpenAI-compatible endpoint works too: OPENAI_BASE_URL and OPENAI_MODEL. memoryd is at
--address (default $MEMORYD_ADDRESS or 127.0.0.1:50051), with $MEMORYD_TOKEN when it has tokens.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

import memoryd_client as md
from memoryd_client.integrations.langgraph import MemorydStore


def memory_graph(llm: BaseChatModel, store: BaseStore) -> CompiledStateGraph[Any]:
    """LangGraph's long-term memory pattern over the store: a node reads what is known of the
    user (the namespace (user_id, "memories")), keeps what the user asks it to remember, and
    calls the model with it."""

    def call_model(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> Any:
        namespace = (config["configurable"]["user_id"], "memories")
        said = str(state["messages"][-1].content)
        known = store.search(namespace, query=said, limit=5)
        info = "; ".join(item.value["data"] for item in known) or "nothing"
        if said.lower().startswith("remember"):
            store.put(namespace, str(uuid.uuid4()), {"data": said.split(":", 1)[-1].strip()})
        system = {"role": "system", "content": f"What you know of the user: {info}"}
        return {"messages": [llm.invoke([system, *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "call_model")
    return builder.compile(store=store)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", md.DEFAULT_ADDRESS))
    parser.add_argument("--user", default="default", help="whose memory it is")
    args = parser.parse_args()
    llm = ChatOpenAI(
        model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL"),
    )
    with md.connect_sync(args.address, token=os.environ.get("MEMORYD_TOKEN")) as channel:
        graph = memory_graph(llm, MemorydStore(channel=channel))
        for line in sys.stdin:
            if line.strip():
                config: RunnableConfig = {
                    "configurable": {"user_id": args.user, "thread_id": uuid.uuid4().hex}
                }
                answer = graph.invoke({"messages": [("user", line.strip())]}, config)
                print(answer["messages"][-1].content, flush=True)  # noqa: T201 - its output
    return 0


if __name__ == "__main__":
    sys.exit(main())

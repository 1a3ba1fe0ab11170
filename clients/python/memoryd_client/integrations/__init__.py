"""memoryd as the memory of agent frameworks, each in the framework's own interface.

- `memoryd_client.integrations.openai_agents` (`pip install "memoryd-client[openai-agents]"`):
  a `Session` of the OpenAI Agents SDK over a conversation's history, and memory tools
  (remember, recall) an Agent can be given.
- `memoryd_client.integrations.langchain` (`[langchain]`): LangChain's chat message history.
- `memoryd_client.integrations.langgraph` (`[langgraph]`): LangGraph's long-term store, its
  namespaces memoryd's owners.
- `memoryd_client.integrations.llama_index` (`[llama-index]`): a memory block of LlamaIndex's
  `Memory`.

Each module imports its framework, which is an extra of this package, never a requirement:
`import memoryd_client` loads none of them.
"""

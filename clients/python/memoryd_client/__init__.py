"""Python client for memoryd: the generated memoryd.v2 messages and stubs, and the conveniences
every adapter needs around them.

    import memoryd_client as md

    async with md.connect("127.0.0.1:50051", token=None) as channel:
        chat = md.ConversationClient(channel, md.Conversation(channel="telegram", chat_id="42"))
        await chat.append(md.user("ada", "hello"))

`connect` sends the bearer token, gives unary calls a default deadline and retries the calls the
contract marks idempotent; `Stubs` holds every service's stub on a channel
(`stubs.conversations`, `stubs.memory`, `stubs.context`, `stubs.resources`, `stubs.reviews`,
`stubs.overview`, `stubs.admin`; `SyncStubs` on a blocking channel); `ConversationClient` fills
in a conversation's key; `connect_sync` and `SyncConversationClient` are the same without
asyncio, for scripts and notebooks; `Transcript` is a realtime transcript stream that resumes
after a cut; `error_details` reads a refusal's reason and field. Every message, enum and stub
of memoryd.v2 is importable from here by name (memoryd_client._surface, generated from the
descriptors); the generated modules live in memoryd_client.v2, and memoryd.v1's (still served)
in memoryd_client.v1 (regenerate with `make protos`).
"""

from __future__ import annotations

from memoryd_client._surface import *  # noqa: F403 - the generated surface, listed in its __all__
from memoryd_client._surface import __all__ as _generated
from memoryd_client.client import (
    DEFAULT_ADDRESS,
    DEFAULT_TIMEOUT_SECONDS,
    assistant,
    connect,
    idempotent_methods,
    service_config,
    user,
)
from memoryd_client.client import Conversation as ConversationClient
from memoryd_client.errors import ErrorDetails, error_details
from memoryd_client.stubs import Stubs, SyncStubs
from memoryd_client.sync import SyncConversation as SyncConversationClient
from memoryd_client.sync import connect_sync
from memoryd_client.transcript import Transcript, TranscriptError

__all__ = [*_generated]  # noqa: PLE0604 - _surface.__all__ is a list of names
__all__ += [
    "DEFAULT_ADDRESS",
    "DEFAULT_TIMEOUT_SECONDS",
    "ConversationClient",
    "ErrorDetails",
    "Stubs",
    "SyncConversationClient",
    "SyncStubs",
    "Transcript",
    "TranscriptError",
    "assistant",
    "connect",
    "connect_sync",
    "error_details",
    "idempotent_methods",
    "service_config",
    "user",
]

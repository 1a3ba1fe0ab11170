"""`memoryd search`, `memoryd embeddings` and `memoryd reindex`: semantic search from a terminal.

`search` runs SearchHistory (hybrid by default) and prints each hit with how it matched;
`embeddings` prints the model and the embedding queue (GetEmbeddingStatus); `reindex` makes every
vector again in the background (ReindexEmbeddings, after a change of the model behind a
provider's name). They call a running server, as remote's commands do.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from google.protobuf import json_format

import memoryd_client as md
from memoryd.cli.remote import Stubs, conversation_arg

MODES = {
    "hybrid": md.SEARCH_MODE_HYBRID,
    "lexical": md.SEARCH_MODE_LEXICAL,
    "semantic": md.SEARCH_MODE_SEMANTIC,
}
COMMANDS = ("search", "embeddings", "reindex")


def add_commands(commands: Any, common: Any) -> None:
    """Add the three commands; `common` adds --address and --json."""
    search = commands.add_parser(
        "search", help="search a conversation's, owner's or agent's history"
    )
    common(search)
    search.add_argument("query", help="the text to look for")
    search.add_argument("--agent", default="", help="the agent (default main)")
    search.add_argument("--owner", default="", help="the owner (default: every owner's history)")
    search.add_argument(
        "--conversation", metavar="CHANNEL:CHAT[:THREAD]", help="only this conversation"
    )
    search.add_argument("--mode", choices=tuple(MODES), default="", help="default hybrid")
    search.add_argument("--limit", type=int, default=10, help="at most this many (10)")
    search.set_defaults(run=_search)
    status = commands.add_parser("embeddings", help="the embedding model and its queue")
    common(status)
    status.set_defaults(run=_status)
    reindex = commands.add_parser("reindex", help="embed every message and memory row again")
    common(reindex)
    reindex.set_defaults(run=_reindex)


def _search(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    request = md.SearchHistoryRequest(
        query=args.query, limit=args.limit, mode=MODES.get(args.mode, md.SEARCH_MODE_UNSPECIFIED)
    )
    if args.conversation:
        request.conversation.CopyFrom(conversation_arg(args.conversation, args.agent, args.owner))
    elif args.owner:
        request.owner.CopyFrom(md.OwnerScope(agent_id=args.agent, owner_id=args.owner))
    else:
        request.agent.CopyFrom(md.AgentScope(agent_id=args.agent))
    response = stubs.memory.SearchHistory(request)
    if args.json:
        document = json_format.MessageToDict(response, preserving_proto_field_name=True)
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        return 0
    for hit in response.hits:
        how = "+".join(
            md.MatchKind.Name(kind).removeprefix("MATCH_KIND_").lower() for kind in hit.matches
        )
        message = hit.message
        out.write(
            f"{message.id}\t{how}\t{hit.scores.fused:.3f}\t{message.conversation.channel}:"
            f"{message.conversation.chat_id}\t{message.sender}\t{hit.snippet}\n"
        )
    return 0


def _status(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
    if args.json:
        document = json_format.MessageToDict(
            response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        return 0
    if not response.enabled:
        out.write('embeddings are off (memoryd.search.embeddings = "off"): search by words only\n')
        return 0
    out.write(
        f"model {response.model} ({response.provider}, {response.dimension or '?'} dimensions)\n"
        f"messages: {response.embedded_messages} embedded, {response.pending_messages} waiting\n"
        f"memory rows: {response.embedded_memories} embedded, "
        f"{response.pending_memories} waiting\n"
    )
    if response.other_model_vectors:
        out.write(f"vectors of earlier models (never compared): {response.other_model_vectors}\n")
    if response.last_error:
        out.write(f"last error: {response.last_error}\n")
    return 0


def _reindex(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.ReindexEmbeddings(md.ReindexEmbeddingsRequest())
    if args.json:
        document = json_format.MessageToDict(
            response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(
            f"queued {response.queued_messages} messages and {response.queued_memories} memory "
            "rows; `memoryd embeddings` shows the progress\n"
        )
    return 0

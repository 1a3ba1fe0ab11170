"""`memoryd search`, `memoryd embeddings` and `memoryd reindex`: semantic search from a terminal.

`search` runs SearchHistory (hybrid by default) and prints each hit with how it matched;
`embeddings` prints the model and the embedding queue (GetEmbeddingStatus), and with `--watch`
follows a bulk load's embedding: what is left, the rate and the time to go, until nothing waits
(or --timeout); `reindex` makes every
vector again in the background (ReindexEmbeddings, after a change of the model behind a
provider's name). They call a running server, as remote's commands do.
"""

from __future__ import annotations

import argparse
import json
import time
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
    status.add_argument(
        "--watch",
        action="store_true",
        help="print the progress every --interval seconds until nothing waits",
    )
    status.add_argument("--interval", type=float, default=2.0, help="seconds between reports (2)")
    status.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="stop watching after this many seconds (0: never)",
    )
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
    response = stubs.api.conversations.SearchHistory(request)
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
    if response.unembedded:
        out.write(
            f"note: {response.unembedded} messages of this scope have no vector yet and were "
            "found by their words only (`memoryd embeddings --watch` shows the progress)\n"
        )
    return 0


def _status(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    if args.watch:
        return _watch(stubs, args, out)
    response = stubs.api.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
    if args.json:
        document = json_format.MessageToDict(
            response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        return 0
    if not response.enabled:
        out.write('embeddings are off (memoryd.search.embeddings = "off"): search by words only\n')
        return 0
    backlog = response.pending_messages - response.live_messages
    out.write(
        f"model {response.model} ({response.provider}, {response.dimension or '?'} dimensions)\n"
        f"messages: {response.embedded_messages} embedded, {response.pending_messages} waiting "
        f"({response.live_messages} live, {backlog} in the backlog)\n"
        f"memory rows: {response.embedded_memories} embedded, "
        f"{response.pending_memories} waiting\n"
    )
    if response.other_model_vectors:
        out.write(f"vectors of earlier models (never compared): {response.other_model_vectors}\n")
    if response.last_error:
        out.write(f"last error: {response.last_error}\n")
    return 0


def _watch(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """One line per --interval: what waits, the rate since the first report, the time to go;
    0 once nothing waits, 1 at --timeout, 2 with embeddings off. The rate is of vectors made:
    the new ones, or the queue's fall (a reindex replaces vectors, adding none)."""
    if args.interval <= 0:
        out.write(f"--interval must be above 0, got {args.interval}\n")
        return 2
    started = time.monotonic()
    first: tuple[float, int, int] | None = None
    while True:
        status = stubs.api.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        now = time.monotonic()
        if not status.enabled:
            out.write('embeddings are off (memoryd.search.embeddings = "off")\n')
            return 2
        waiting = status.pending_messages + status.pending_memories
        done = status.embedded_messages + status.embedded_memories
        report: dict[str, Any] = {
            "waiting": waiting,
            # The live queue (chats' messages, then rows) is embedded before the backlog.
            "live": status.live_messages + status.pending_memories,
            "backlog": status.pending_messages - status.live_messages,
            "embedded": done,
        }
        if first is None:
            first = (now, done, waiting)
        elif now > first[0]:
            rate = max(done - first[1], first[2] - waiting) / (now - first[0])
            report["per_second"] = round(rate, 1)
            if rate > 0:
                report["seconds_to_go"] = round(waiting / rate)
        if status.last_error:
            report["last_error"] = status.last_error
        out.write((json.dumps(report) if args.json else _progress_line(report)) + "\n")
        out.flush()
        if waiting == 0:
            return 0
        if args.timeout and now - started >= args.timeout:
            return 1
        time.sleep(args.interval)


def _progress_line(report: dict[str, Any]) -> str:
    line = (
        f"{report['waiting']} waiting ({report['live']} live, {report['backlog']} in the "
        f"backlog), {report['embedded']} embedded"
    )
    if "per_second" in report:
        line += f", {report['per_second']}/s"
    if "seconds_to_go" in report:
        line += f", about {report['seconds_to_go']} s to go"
    if "last_error" in report:
        line += f" (last error: {report['last_error']})"
    return line


def _reindex(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.api.admin.ReindexEmbeddings(md.ReindexEmbeddingsRequest())
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

"""A real local HTTP server that speaks the OpenAI chat-completions protocol with scripted replies
(and Anthropic's Messages protocol with the same replies, for clients that speak only that one:
the Claude Agent SDK's agent, at `anthropic_base_url`).

    with FakeModel() as model:                 # listens on 127.0.0.1, a free port
        model.reply("Nothing to save.")
        model.reply(tool_calls=[ToolCall("memory_add", {"target": "user", ...})])
        model.fail(500)                         # an HTTP error status
        model.reply("late", delay_seconds=5)    # a slow reply (for timeouts)
        model.garbage()                         # a body that is not JSON
        ... point a provider's base_url at model.base_url ...
        model.requests                          # every request body received, in order
        FakeModel(refuse=frozenset({"tools"}))  # answer 400 to requests carrying a parameter

Scripted replies are served in order; when none is left, `default` answers (by default the
literal "Nothing to save."), or `responder(request)` when one is set. Nothing here reaches the
network beyond loopback.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

# How often the server thread looks for a stop: the most stop() waits.
POLL_SECONDS = 0.02


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model makes: a function name and its arguments."""

    name: str
    arguments: dict[str, Any] | str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted answer."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200
    delay_seconds: float = 0.0
    raw_body: bytes | None = None
    prompt_tokens: int = 100
    # An answer of more tokens than the request's max_tokens ends with finish_reason "length",
    # as a provider's would.
    completion_tokens: int = 20


Responder = Callable[[dict[str, Any]], Reply]


class _QuietServer(http.server.ThreadingHTTPServer):
    """A client that goes away mid-request (a memoryd killed by a crash test) is not news."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeModel:
    """The server; use as a context manager or call start() / stop()."""

    def __init__(
        self,
        *,
        default: Reply | None = None,
        responder: Responder | None = None,
        refuse: frozenset[str] = frozenset(),
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        # Request parameters answered with HTTP 400, as Ollama and llama.cpp do for some
        # (reasoning_effort, tools); such a request does not use up a scripted reply.
        self.refuse = refuse
        # Requests being answered right now, and the most there ever were at once.
        self.in_flight = 0
        self.max_in_flight = 0
        self.default = default or Reply(content="Nothing to save.")
        self.responder = responder
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # serve_forever's poll interval is how long stop() waits for it (0.5 s by default,
        # paid at the end of every test that uses a fake).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, for a provider's base_url."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The base URL of Anthropic's Messages API (ANTHROPIC_BASE_URL): /v1/messages."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(
        self,
        content: str | None = None,
        *,
        tool_calls: list[ToolCall] | None = None,
        delay_seconds: float = 0.0,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
    ) -> None:
        """Script a successful answer."""
        self._push(
            Reply(
                content=content,
                tool_calls=tuple(tool_calls or ()),
                delay_seconds=delay_seconds,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
        )

    def fail(self, status: int = 500, *, delay_seconds: float = 0.0) -> None:
        """Script an HTTP error (429, 500, 503, ...)."""
        self._push(Reply(status=status, delay_seconds=delay_seconds))

    def garbage(self) -> None:
        """Script a 200 whose body is not JSON."""
        self._push(Reply(raw_body=b"<html>definitely not json"))

    def start(self) -> FakeModel:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _push(self, reply: Reply) -> None:
        with self._lock:
            self._script.append(reply)

    def _next(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(request)
        return self.default

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read requests from `model.requests`."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    request = {}
                path = self.path.split("?", 1)[0].rstrip("/")
                if path.endswith("/v1/messages/count_tokens"):
                    self._send(200, b'{"input_tokens": 100}')
                    return
                messages = path.endswith("/v1/messages")
                if not (messages or path.endswith("/chat/completions")):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                refused = sorted(model.refuse & set(request))
                if refused:
                    with model._lock:
                        model.requests.append(request)
                    message = f"unrecognized request argument: {refused[0]}"
                    self._send(400, json.dumps({"error": {"message": message}}).encode())
                    return
                reply = model._next(request)
                model._enter()
                try:
                    if reply.delay_seconds:
                        time.sleep(reply.delay_seconds)
                    if messages and reply.status == 200 and reply.raw_body is None:
                        self._answer_messages(request, reply)
                    else:
                        self._answer(request, reply)
                finally:
                    model._leave()

            def _answer(self, request: dict[str, Any], reply: Reply) -> None:
                if reply.raw_body is not None:
                    self._send(200, reply.raw_body)
                elif reply.status != 200:
                    error = {"error": {"message": f"scripted {reply.status}", "type": "server"}}
                    self._send(reply.status, json.dumps(error).encode())
                else:
                    self._send(200, json.dumps(_completion(request, reply)).encode())

            def _answer_messages(self, request: dict[str, Any], reply: Reply) -> None:
                message = _message(request, reply)
                if not request.get("stream"):
                    self._send(200, json.dumps(message).encode())
                    return
                self._send(200, _message_events(message), "text/event-stream")

            def _send(
                self, status: int, body: bytes, content_type: str = "application/json"
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        return Handler


def _completion(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments),
                },
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(request, reply),
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _finish_reason(request: dict[str, Any], reply: Reply) -> str:
    cap = request.get("max_tokens")
    if isinstance(cap, int) and reply.completion_tokens > cap:
        return "length"
    return "tool_calls" if reply.tool_calls else "stop"


def _message(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A reply as Anthropic's Messages API gives it: text and tool_use blocks."""
    blocks: list[dict[str, Any]] = []
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    for call in reply.tool_calls:
        arguments = (
            json.loads(call.arguments) if isinstance(call.arguments, str) else call.arguments
        )
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:16]}",
                "name": call.name,
                "input": arguments,
            }
        )
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "fake"),
        "content": blocks,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens},
    }


def _message_events(message: dict[str, Any]) -> bytes:
    """The Messages API's stream of a message: its start, each block whole, its end."""
    head = {**message, "content": [], "stop_reason": None}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": head})]
    for index, block in enumerate(message["content"]):
        start: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            ("content_block_start", {"index": index, "content_block": start}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [
        (
            "message_delta",
            {"delta": stop, "usage": {"output_tokens": message["usage"]["output_tokens"]}},
        ),
        ("message_stop", {}),
    ]
    return "".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events
    ).encode()

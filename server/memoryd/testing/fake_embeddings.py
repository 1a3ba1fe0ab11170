"""A real local HTTP server that speaks the OpenAI `/embeddings` protocol.

    with FakeEmbeddings(dimension=64) as endpoint:  # 127.0.0.1, a free port
        ... point a provider's base_url at endpoint.base_url ...
        endpoint.fail(500, times=3)                 # the next three calls answer HTTP 500
        endpoint.requests                           # every request body received, in order

A text's vector is its bag of words, each word hashed to one of `dimension` components, so that
texts sharing words are near and texts sharing none are orthogonal: enough to tell from the
outside which vectors a search compared. Nothing here reaches the network beyond loopback.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
from types import TracebackType
from typing import Any

# How often the server thread looks for a stop: the most stop() waits.
POLL_SECONDS = 0.02

WORD = re.compile(r"\w+")


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        return  # a client that went away mid-call is not news here


def bag_of_words(text: str, dimension: int) -> list[float]:
    """The fake model's vector of `text`."""
    vector = [0.0] * dimension
    for word in WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        vector[int.from_bytes(digest[:4], "big") % dimension] += 1.0
    return vector


class FakeEmbeddings:
    """The server; use as a context manager or call start() / stop()."""

    def __init__(self, *, dimension: int = 64) -> None:
        self.dimension = dimension
        self.requests: list[dict[str, Any]] = []
        self._failures: list[int] = []
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        # serve_forever's poll interval is how long stop() waits for it (0.5 s by default,
        # paid at the end of every test that uses a fake).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The URL to configure as a provider's base_url."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def fail(self, status: int = 500, *, times: int = 1) -> None:
        """Answer the next `times` calls with HTTP `status`."""
        with self._lock:
            self._failures.extend([status] * times)

    def hold(self, word: str) -> None:
        """Answer HTTP 503 to every call with a text holding `word` (until recover())."""
        with self._lock:
            self._held.add(word)

    def recover(self) -> None:
        """Forget the failures not answered yet and the held words: the next call succeeds."""
        with self._lock:
            self._failures.clear()
            self._held.clear()

    def start(self) -> FakeEmbeddings:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeEmbeddings:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(request)
            status = self._failures.pop(0) if self._failures else 200
            held = frozenset(self._held)
        texts = request.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if status == 200 and held and isinstance(texts, list):
            status = 503 if any(word in str(text) for text in texts for word in held) else 200
        if status != 200:
            return status, {"error": {"message": "scripted failure", "type": "server_error"}}
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            return 400, {"error": {"message": "input must be a string or strings"}}
        return 200, {
            "object": "list",
            "model": request.get("model", ""),
            "data": [
                {
                    "object": "embedding",
                    "index": index,
                    "embedding": bag_of_words(text, self.dimension),
                }
                for index, text in enumerate(texts)
            ],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/embeddings"):
                    status, answer = 404, {"error": {"message": f"no route {self.path}"}}
                else:
                    status, answer = fake._answer(body)
                data = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

"""Use cases in the test's own process: the services a server holds (memoryd.services.use_cases),
built as `memoryd serve` builds them (memoryd.runtime.Runtime.open) over a data directory of the
test's and, when the suite runs on PostgreSQL, a database of its own there.

Two ways in, neither with a subprocess (whose start is about 1.2 s of CPU, most of it imports):
- `use_cases`: the runtime itself; the test calls the use cases with the domain's values.
- `ServedInProcess`: the same runtime behind memoryd's own gRPC services (every RPC of both
  versions, wrapped as a server wraps them: memoryd.server.add_memoryd_services, on a gRPC
  server with a server's options: memoryd.server.grpc_server) on a free loopback port, served
  by a thread of its own; the test calls it with the generated clients.

What a server adds around them (TLS, tokens, health and reflection, HTTP/JSON, signals, the
background reviewer and embedder, its log lines and metrics) stays tested through the subprocess
server (memoryd.testing.server_process).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from memoryd.api.status import log_rpc_with_logging
from memoryd.config import Settings
from memoryd.config.loading import load_settings
from memoryd.runtime import Runtime
from memoryd.server import add_memoryd_services, grpc_server
from memoryd.serving.grpc_limits import ListenerLimits
from memoryd.testing import postgres

START_TIMEOUT = 60.0


@contextlib.asynccontextmanager
async def use_cases(
    home: Path, *, config: str | None = None, env: Mapping[str, str] | None = None
) -> AsyncIterator[Runtime]:
    """The runtime of a memoryd on `home` (created), configured by `config` (a config file's
    text) and `env`, as a server would open it; closed, with everything it committed, when the
    block ends. Its background reviewer and embedder are not started: the test drives them."""
    settings, environment = _settings(home, config, env or {})
    runtime = Runtime.open(settings, environment)
    try:
        yield runtime
    finally:
        await runtime.close()


class ServedInProcess:
    """memoryd's gRPC services over a runtime opened as `use_cases` opens it, on 127.0.0.1, in
    a thread with its own event loop: a test may block (a blocking client, a CLI command)
    without stopping it."""

    def __init__(
        self, home: Path, *, config: str | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.home = home
        self.address = ""
        self._config = config
        self._env = env or {}
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        # The runtime it serves, once started (its use cases live on the server's thread).
        self.runtime: Runtime | None = None
        self._thread = threading.Thread(target=self._run, name=f"memoryd {home}", daemon=True)

    def start(self) -> ServedInProcess:
        """Returns once it serves at `address`; raises what stopped its start."""
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise TimeoutError(f"the in-process memoryd on {self.home} did not start")
        if self._failed is not None:
            raise self._failed
        return self

    def stop(self) -> None:
        """Stop serving and close the runtime, with everything it committed; raises what went
        wrong in its thread."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(START_TIMEOUT)
        if self._thread.is_alive():
            raise TimeoutError(f"the in-process memoryd on {self.home} did not stop")
        if self._failed is not None:
            raise self._failed

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # noqa: BLE001 - raised again in the test's thread
            self._failed = error
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        settings, environment = _settings(self.home, self._config, self._env)
        runtime = self.runtime = Runtime.open(settings, environment)
        try:
            limits = ListenerLimits.for_process(settings.server)
            server = grpc_server(settings.server, limits.main, shared=False)
            add_memoryd_services(server, settings, runtime, log_rpc_with_logging)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            self.address = f"127.0.0.1:{port}"
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                await server.stop(None)
        finally:
            await runtime.close()


def _settings(
    home: Path, config: str | None, env: Mapping[str, str]
) -> tuple[Settings, Mapping[str, str]]:
    home.mkdir(parents=True, exist_ok=True)
    config_path = None
    if config is not None:
        config_path = home.parent / f"{home.name}-config.toml"
        config_path.write_text(config, encoding="utf-8")
        config_path.chmod(0o600)  # a config holding tokens must be private
    environment = {**postgres.environment_for(home), **env}
    settings = load_settings(
        environment, config_path=None if config_path is None else str(config_path), home=str(home)
    )
    return settings, environment

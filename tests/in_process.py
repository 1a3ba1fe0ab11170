"""Use cases in the test's own process: the services a server holds (memoryd.services.use_cases),
built as `memoryd serve` builds them (memoryd.runtime.Runtime.open) over a data directory of the
test's and, when the suite runs on PostgreSQL, a database of its own there.

No gRPC and no subprocess: a use-case test pays neither a server's start (about 1.2 s of CPU)
nor a call's wire, and calls the use cases with the domain's values. What the wire adds (the
contract's checks, authentication, statuses, every surface) stays tested through the subprocess
server (memoryd.testing.server_process).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from memoryd.config.loading import load_settings
from memoryd.runtime import Runtime
from memoryd.testing import postgres


@contextlib.asynccontextmanager
async def use_cases(
    home: Path, *, config: str | None = None, env: Mapping[str, str] | None = None
) -> AsyncIterator[Runtime]:
    """The runtime of a memoryd on `home` (created), configured by `config` (a config file's
    text) and `env`, as a server would open it; closed, with everything it committed, when the
    block ends. Its background reviewer and embedder are not started: the test drives them."""
    runtime = _opened(home, config, env or {})
    try:
        yield runtime
    finally:
        await runtime.close()


def _opened(home: Path, config: str | None, env: Mapping[str, str]) -> Runtime:
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
    return Runtime.open(settings, environment)

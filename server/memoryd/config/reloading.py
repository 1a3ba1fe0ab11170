"""A changed config file, applied to a running server without a restart: its tokens.

`memoryd serve` reads its settings once. On SIGHUP it reads the config file again and takes its
`[memoryd.auth]` (the tokens, and cli_token_file): tokens are what an operator changes while a
server must keep running (a leaked one withdrawn, an adapter added), and swapping them disturbs
no call in flight. Every other setting waits for a restart, and the reload says which changed.
Turning authentication on or off needs a restart too: whether a listener may be exposed at all
depends on it (memoryd.config.exposure).

With workers (`serve --workers N`), the supervisor alone reads the file. It gives each worker
the same `Snapshot` of it, one JSON line on a pipe, when the worker starts and after each
reload: every worker answers with the same tokens at every moment, and a worker started again
after a crash runs what its siblings run, never what the file says since.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memoryd.config.document import Document
from memoryd.config.exposure import check_private_settings
from memoryd.config.loading import config_document, load_settings
from memoryd.config.settings import Settings
from memoryd.errors import StartupError

AUTH = "auth"


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """The config file as a server runs it: where it was read, and its [memoryd] table."""

    path: Path | None
    table: dict[str, Any]

    @classmethod
    def of(cls, document: Document) -> Snapshot:
        """The snapshot of a document as read."""
        return cls(document.path, document.table)

    @property
    def document(self) -> Document:
        """As the settings' loader takes it."""
        return Document(self.path, self.table)

    def line(self) -> bytes:
        """One line of JSON (what a supervisor writes to its workers)."""
        found = {"path": str(self.path) if self.path else None, "table": self.table}
        return json.dumps(found, default=str).encode() + b"\n"

    @classmethod
    def parse(cls, line: bytes) -> Snapshot:
        """What `line` wrote."""
        found = json.loads(line)
        path = found.get("path")
        return cls(Path(path) if path else None, found["table"])


@dataclasses.dataclass(frozen=True, slots=True)
class Reloaded:
    """A reload: the snapshot to run now, its settings, and the settings beyond the tokens
    that the file changes but that wait for a restart."""

    snapshot: Snapshot
    settings: Settings
    waiting: tuple[str, ...]


def reload_tokens(
    running: Snapshot,
    current: Settings,
    env: Mapping[str, str],
    *,
    config_path: str | None,
    home: str | None,
    listen: str | None,
) -> Reloaded:
    """Read the config file again and take its [memoryd.auth] into the running snapshot.
    StartupError (nothing changes) when the file cannot be read or its settings are refused,
    when it would turn authentication on or off, or when it now holds a secret others can
    read."""
    fresh = config_document(env, config_path=config_path, home=home)
    # The whole file must still be one memoryd would start with; only its tokens are taken.
    whole = load_settings(env, config_path=config_path, home=home, listen=listen, document=fresh)
    table = {name: value for name, value in running.table.items() if name != AUTH}
    if AUTH in fresh.table:
        table[AUTH] = fresh.table[AUTH]
    settings = dataclasses.replace(current, auth=whole.auth, secrets_in_file=whole.secrets_in_file)
    if bool(settings.auth.tokens) != bool(current.auth.tokens):
        raise StartupError(
            "the reloaded config turns authentication "
            + ("on" if settings.auth.tokens else "off")
            + ": that needs a restart (a listener's exposure depends on it); the tokens stay "
            "as they were"
        )
    check_private_settings(settings)
    waiting = tuple(
        sorted(
            f"memoryd.{name}"
            for name in set(fresh.table) | set(running.table)
            if name != AUTH and fresh.table.get(name) != running.table.get(name)
        )
    )
    return Reloaded(Snapshot(fresh.path, table), settings, waiting)


@dataclasses.dataclass(slots=True)
class Running:
    """What a serving process runs (its snapshot of the file and its settings), and where the
    file is found again on a reload."""

    snapshot: Snapshot
    settings: Settings
    env: Mapping[str, str]
    config_path: str | None = None
    home: str | None = None
    listen: str | None = None

    def reload(self) -> Reloaded:
        """Read the file again and run its tokens (StartupError: nothing changes)."""
        reloaded = reload_tokens(
            self.snapshot,
            self.settings,
            self.env,
            config_path=self.config_path,
            home=self.home,
            listen=self.listen,
        )
        self.snapshot, self.settings = reloaded.snapshot, reloaded.settings
        return reloaded

    def take(self, snapshot: Snapshot) -> Settings:
        """Run the tokens of a snapshot the supervisor gave (a worker's reload)."""
        given = load_settings(
            self.env,
            config_path=self.config_path,
            home=self.home,
            listen=self.listen,
            document=snapshot.document,
        )
        self.snapshot = snapshot
        self.settings = dataclasses.replace(self.settings, auth=given.auth)
        return self.settings

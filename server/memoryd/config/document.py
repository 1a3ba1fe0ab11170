"""The one reader of the config file: found, parsed and checked for its top-level shape once.

The file is `--config PATH`, else $MEMORYD_CONFIG, else `<home>/config.toml` when it exists (an
explicit path that does not exist is refused). Everything memoryd reads from it is under
[memoryd]; another top-level table is refused, so that a misplaced section never silently does
nothing.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from memoryd.errors import StartupError


@dataclasses.dataclass(frozen=True, slots=True)
class Document:
    """The config file's [memoryd] table (empty without a file), and where it was read."""

    path: Path | None
    table: dict[str, Any]

    @property
    def where(self) -> str:
        """The prefix of an error about this file's contents ("" without a file)."""
        return where(self.path)

    def section(self, name: str) -> dict[str, Any]:
        """The [memoryd.<name>] table (empty when absent); StartupError when it is no table."""
        values = self.table.get(name, {})
        if not isinstance(values, dict):
            raise StartupError(f"{self.where}[memoryd.{name}] must be a table")
        return values


def read_document(explicit: str | None, home: Path) -> Document:
    """The config file at `explicit`, else `<home>/config.toml` if it exists."""
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise StartupError(f"config file {path} does not exist")
    else:
        path = home / "config.toml"
        if not path.is_file():
            return Document(None, {})
    try:
        with path.open("rb") as handle:
            parsed = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise StartupError(f"config file {path} is not valid TOML: {error}") from None
    except OSError as error:
        raise StartupError(f"config file {path} cannot be read: {error.strerror}") from None
    extra = sorted(set(parsed) - {"memoryd"})
    if extra:
        raise StartupError(f"{where(path)}unknown top-level table [{extra[0]}]; use [memoryd.*]")
    table = parsed.get("memoryd", {})
    if not isinstance(table, dict):
        raise StartupError(f"{where(path)}[memoryd] must be a table")
    return Document(path, table)


def where(path: Path | None) -> str:
    """The prefix of an error about the contents of the file at `path`."""
    return f"config file {path}: " if path is not None else ""

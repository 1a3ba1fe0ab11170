"""Writing the config file: as an editable document that keeps its comments and layout
(tomlkit), written whole and private. `memoryd setup` writes a provider with it, and
UpdateReviewSettings the review's triggers."""

from __future__ import annotations

import errno
import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit


def read_editable(path: Path) -> tomlkit.TOMLDocument:
    """The config file as an editable document that keeps its comments (empty when none)."""
    if not path.is_file():
        return tomlkit.document()
    text = path.read_text(encoding="utf-8")
    try:
        plain = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = f"{path} is not valid TOML: {error}"
        raise ValueError(message) from None
    table = plain.get("memoryd", {})
    if not isinstance(table, dict) or not isinstance(table.get("providers", []), list):
        message = f"{path} does not have memoryd's shape ([memoryd], [[memoryd.providers]])"
        raise ValueError(message)  # noqa: TRY004 - reported like every other bad answer
    return tomlkit.parse(text)


def write_private(path: Path, text: str) -> None:
    """Write the config file 0600 in a folder created 0700, whatever the caller's umask: it may
    hold tokens, and whoever can write it can give themselves one (`serve` refuses a config
    file that others can write, or read when it holds a token)."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
        path.parent.chmod(0o700)  # mkdir's mode is filtered by the umask
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
        os.write(descriptor, text.encode("utf-8"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    temp.replace(path)


def save_section(path: Path, section: str, values: Mapping[str, Any]) -> None:
    """Set `values` in [memoryd.<section>] of the file at `path` (created when absent), keeping
    every other setting and comment. ValueError when the file is not memoryd's TOML; OSError
    when it cannot be written."""
    if path.exists() and not (path.stat().st_mode & stat.S_IWUSR and os.access(path, os.W_OK)):
        raise PermissionError(errno.EACCES, "it is read-only", str(path))
    document = read_editable(path)
    table = document.setdefault("memoryd", {}).setdefault(section, {})
    for key, value in values.items():
        table[key] = value
    write_private(path, tomlkit.dumps(document))

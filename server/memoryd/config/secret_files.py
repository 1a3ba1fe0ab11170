"""Secrets kept in files of their own (a container's mounted secrets, a Kubernetes Secret
volume): a token (`token_file`) or PostgreSQL's password (`[memoryd.storage] password_file`).

A file holds one secret; one trailing line break is dropped (`echo` and editors add it). As ssh
does with a key, memoryd refuses a secret file that other users can read or write, naming the
chmod that fixes it: in a container, the file's owner and mode are the host's (chown it to
memoryd's uid, chmod 400).
"""

from __future__ import annotations

from pathlib import Path

from memoryd.errors import StartupError


def read_secret_file(name: str, label: str) -> str:
    """The secret in the file `name` (setting `label`); StartupError when it cannot be read,
    is empty, or is open to other users."""
    path = Path(name).expanduser()
    try:
        mode = path.stat().st_mode & 0o7777
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "it is not UTF-8 text"
        raise StartupError(f"{label} {path} cannot be read: {reason}") from None
    if mode & 0o077:
        raise StartupError(
            f"{label} {path} can be read or written by other users (mode {mode:04o}): anyone "
            f"who reads it holds the secret. Run: chmod 400 {path}"
        )
    secret = text.removesuffix("\n").removesuffix("\r")
    if not secret:
        raise StartupError(f"{label} {path} is empty")
    return secret

"""The data directory's own files, and its lock: one process works on a directory at a time.

A server holds the lock for as long as it serves (`memoryd serve`), and `memoryd restore` while it
swaps the database; the lock file holds the holder's pid, so a refusal can name it.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from memoryd.domain.resources import PROMPT_FILE_NAMES
from memoryd.errors import StartupError
from memoryd.log_events import Event

log = logging.getLogger("memoryd.data_directory")

DATABASE_FILE = "memory.db"
LOCK_FILE = "memoryd.lock"
# Held by the process that embeds, where several share the store (memoryd.storage.background_lock).
BACKGROUND_LOCK_FILE = "memoryd.background.lock"
# Taken around each write transaction by each worker's writer (memoryd.storage.write_queue).
WRITE_LOCK_FILE = "memoryd.write.lock"
# Held while a process writes a prompt file, where several share the store
# (memoryd.services.prompt_files).
PROMPT_FILES_LOCK = "memoryd.prompts.lock"
# The database and the files SQLite keeps beside it in WAL mode.
DATABASE_FILES = (DATABASE_FILE, f"{DATABASE_FILE}-wal", f"{DATABASE_FILE}-shm")


class Locked(Exception):
    """Another process holds the data directory."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def lock(home: Path) -> int:
    """Take the data directory's lock (creating the directory 0700 if needed) and write our pid
    into it; returns the descriptor that holds it (close it to release). Raises Locked with the
    holder's pid when another process has it, OSError when the directory cannot be used."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(descriptor, 32).decode("ascii", "replace").strip() or "unknown"
        os.close(descriptor)
        raise Locked(holder) from None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, str(os.getpid()).encode("ascii"))
    return descriptor


def inherited_lock(home: Path, descriptor: int) -> int:
    """The data directory's lock as a worker inherits it from its supervisor (memoryd.supervisor):
    `descriptor` must be the open lock file of `home`, and that open file must hold the lock
    (flock belongs to the open file, which the supervisor and its workers share). Raises Locked
    otherwise: a process that was not given the lock gets no way in."""
    try:
        opened = os.fstat(descriptor)
        expected = (home / LOCK_FILE).stat()
    except OSError:
        raise Locked("unknown") from None
    if (opened.st_dev, opened.st_ino) != (expected.st_dev, expected.st_ino):
        raise Locked("unknown")
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise Locked(os.pread(descriptor, 32, 0).decode("ascii", "replace").strip()) from None
    return descriptor


def inherit_lock(home: Path, descriptor: int) -> int:
    """`inherited_lock`, refused as a start-up error (a worker that was not given the lock)."""
    try:
        return inherited_lock(home, descriptor)
    except Locked:
        raise StartupError(
            f"--worker-of is for the workers `memoryd serve --workers N` starts: this process "
            f"does not hold the lock of {home}"
        ) from None


CONFIG_FILE = "config.toml"
REPLACED_PREFIX = f"{DATABASE_FILE}.replaced-"
RENDERED_FILE_NAMES = frozenset(PROMPT_FILE_NAMES.values())


def replaced_databases(home: Path) -> list[Path]:
    """The databases `memoryd restore` replaced (with their -wal and -shm), oldest first."""
    try:
        return sorted(path for path in home.iterdir() if path.name.startswith(REPLACED_PREFIX))
    except OSError:
        return []


def residual_files(home: Path, *, wal_truncated: bool) -> list[str]:
    """Files in the data directory (relative to it) that may still hold erased data: anything
    memoryd does not keep itself (replaced databases, stray temp files, whatever else was put
    there), and the WAL while it is not truncated. The database (scrubbed), its shared-memory
    index, the lock, the config file and the other owners' prompt files are left out: they
    hold none of what an erasure removed."""
    kept = {
        DATABASE_FILE,
        f"{DATABASE_FILE}-shm",
        LOCK_FILE,
        BACKGROUND_LOCK_FILE,
        WRITE_LOCK_FILE,
        PROMPT_FILES_LOCK,
        CONFIG_FILE,
    }
    if wal_truncated:
        kept.add(f"{DATABASE_FILE}-wal")
    found: list[str] = []
    for folder, _directories, files in os.walk(home):
        for name in files:
            relative = (Path(folder) / name).relative_to(home)
            in_prompts = relative.parts[0] == "memory" and name in RENDERED_FILE_NAMES
            if str(relative) in kept or in_prompts:
                continue
            found.append(str(relative))
    return sorted(found)


def private_files(home: Path) -> None:
    """What memoryd writes only its own user may read: the process creates files 0600 and
    folders 0700 whatever umask it was started with (SQLite's WAL and shared-memory files take
    the database's mode), and files an older memoryd left readable are tightened. A data
    directory that others can read is the operator's choice, and only warned about."""
    os.umask(0o077)
    try:
        mode = home.stat().st_mode
    except FileNotFoundError:
        return
    if mode & 0o077:
        log.warning(
            "the data directory %s can be read by other users (mode %s); chmod 700 it",
            home,
            oct(mode & 0o777),
            extra={"event": Event.HOME_READABLE, "home": str(home), "mode": oct(mode & 0o777)},
        )
    for path in [
        *(home / name for name in (LOCK_FILE, *DATABASE_FILES)),
        *_tree(home / "memory"),
    ]:
        try:
            current = path.stat().st_mode
            private = 0o700 if path.is_dir() else 0o600
            if current & 0o077:
                path.chmod(private)
        except OSError:  # gone meanwhile, or not ours to change: nothing to tighten
            continue


def _tree(root: Path) -> list[Path]:
    try:
        return [root, *root.rglob("*")] if root.exists() else []
    except OSError:
        return []

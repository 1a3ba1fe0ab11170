"""USER.md and MEMORY.md as a service: render in the write transaction, write after commit.

A change that may affect an owner's prompt files re-renders both inside the same transaction as
the change and commits a revision for each file whose text changed. After the commit (on the
writer thread, so in commit order) the changed files are written by temp file + rename and the
prompt cache takes the new text: the file on disk is always the last committed render.

A file that could not be written after its commit (a full disk, PostgreSQL gone while the
process read the newest revision, a lock it could not take) is marked stale and rewritten from
its current revision by `keep_converged`, which tries again every HEAL_SECONDS while any file is
stale: so a file converges within seconds of the fault's end, whatever the fault and whether or
not the write is retried. At every start, a worker's as well, every prompt file is checked
against its current revision and rewritten if it differs (a process killed between commit and
write, a hand edit), and stray temp files are removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import fcntl
import functools
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from memoryd.data_directory import PROMPT_FILES_LOCK
from memoryd.domain import prompt_files as render_rules
from memoryd.domain.conversation import OwnerKey
from memoryd.domain.messages import Trust
from memoryd.domain.prompt_files import PROMPT_FILES
from memoryd.domain.resources import (
    MutationSource,
    ResourceType,
    Revision,
    prompt_file_path,
)
from memoryd.domain.tokens import count_tokens
from memoryd.errors import MemorydError
from memoryd.log_events import Event
from memoryd.services.coherence import Coherence
from memoryd.services.prompt_state import (
    CommittedRender,
    FileState,
    PromptState,
    ResyncReport,
    load_state,
    resource_key,
    rows_shown,
)
from memoryd.services.read_through import ReadThroughCache
from memoryd.storage import memory_reads, resource_store
from memoryd.storage.database import OpenedDatabase
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction

log = logging.getLogger("memoryd.prompt_files")
TEMP_SUFFIX = ".tmp"
# How often stale files are tried again: a file converges within this much of the fault's end
# (plus one write).
HEAL_SECONDS = 1.0
PROMPT_TYPES = (ResourceType.USER_MD, ResourceType.MEMORY_MD)


class PromptFiles:
    """Renders, versions, writes and caches the prompt files."""

    def __init__(
        self,
        home: Path,
        readers: ReaderPool,
        cache_capacity: int = 4096,
        coherence: Coherence | None = None,
    ) -> None:
        """`coherence`: where the store may be shared, what drops the cache when another
        process wrote (None: nothing serves from the cache but this process's own reads)."""
        self._home = home
        self._readers = readers
        self.cache: ReadThroughCache[OwnerKey, PromptState] = ReadThroughCache(
            cache_capacity, "prompt_files"
        )
        self._coherence = coherence
        if coherence is not None:
            coherence.track(self.cache)
        # Files whose write after a commit failed: rewritten from their current revision.
        self._stale: set[str] = set()
        self._stale_lock = threading.Lock()

    @property
    def stale(self) -> int:
        """How many files wait to be rewritten from their current revision."""
        with self._stale_lock:
            return len(self._stale)

    # --- inside the write transaction (writer thread) ------------------------------------------

    def render_in_transaction(
        self,
        connection: Transaction,
        owner: OwnerKey,
        *,
        mutation_source: MutationSource,
        provenance: dict[str, object],
        now: dt.datetime,
    ) -> CommittedRender:
        """Render both files from the rows and commit a revision for each changed file. Each
        revision's provenance records the rows it renders (`rendered`, ids in order)."""
        records = memory_reads.render_input(connection, owner)
        states: dict[ResourceType, FileState] = {}
        changed: list[tuple[str, Revision]] = []
        for file in PROMPT_FILES:
            rendered = render_rules.render(file, records, count_tokens)
            path = prompt_file_path(owner.agent_id, owner.owner_id, file.resource_type)
            committed = resource_store.commit(
                connection,
                resource_key(owner, file.resource_type),
                path=path,
                content=rendered.text,
                mutation_source=mutation_source,
                provenance_json=json.dumps(
                    {
                        **provenance,
                        "rendered": list(rendered.memory_ids),
                        # What each rendered row said: a rollback puts the rows back so.
                        "values": {str(r.id): r.value for r in rows_shown(rendered, records)},
                    },
                    separators=(",", ":"),
                    sort_keys=True,
                ),
                now=now,
            )
            if committed.created is not None:
                changed.append((path, committed.created))
            states[file.resource_type] = FileState(
                rendered.text, rendered.tokens, committed.current, tuple(rendered.memory_ids)
            )
        state = PromptState(states[ResourceType.USER_MD], states[ResourceType.MEMORY_MD])
        return CommittedRender(owner, state, tuple(changed))

    # --- after commit (writer thread, commit order) --------------------------------------------

    def publish(self, render: CommittedRender) -> None:
        """Cache the committed state, then write the changed files.

        The cache first: GetPromptContext must follow the database even when a file cannot be
        written (a full disk, a path taken by something else); the file is then stale, and
        rewritten from its current revision as soon as it can be (keep_converged).
        """
        self.cache.put(render.owner, render.state)
        for path, revision in render.revisions:
            self._attempt(path, functools.partial(self.write_committed, path, revision.content))

    def publish_revision(self, path: str, revision: Revision) -> None:
        """A single committed revision (a rollback): refresh the owner's cache, write the file."""
        self.cache.invalidate(OwnerKey(revision.key.agent_id, revision.key.scope_id))
        self._attempt(path, lambda: self.write_committed(path, revision.content))

    def _attempt(self, relative: str, write: Callable[[], bool]) -> None:
        """Write a file after its commit; on any failure, mark it stale for keep_converged
        (one warning line, no traceback: the commit stands, and the file follows it)."""
        try:
            written = write()
        except (MemorydError, OSError) as error:
            written = False
            log.warning(
                "could not write %s after its commit (%s); it is rewritten from its current "
                "revision as soon as it can be",
                relative,
                getattr(error, "message", None) or error,
                extra={"event": Event.PROMPT_FILE_WRITE_FAILED, "path": relative},
            )
        if not written:
            with self._stale_lock:
                self._stale.add(relative)

    def write_committed(self, relative: str, content: str) -> bool:
        """Write a file after the commit of `content` (never on the event loop).

        Alone on the store, `content` is written: this process's commits are the only ones,
        and its writer publishes them in commit order. Where other processes share the store
        (memoryd.services.coherence), two of them could write one file in the wrong order. So
        each takes the data directory's prompt-file lock and writes the file's current revision
        as the database holds it once the lock is taken (or removes the file when its resource
        is gone): whichever process writes last writes the newest revision, and a file never
        goes back to an older one.
        """
        if self._coherence is None or not self._coherence.shared:
            return self.write_file(relative, content)
        with self.files_locked():
            current = self._readers.read_now(
                lambda connection: resource_store.current_content(connection, relative)
            )
            if current is None:
                return self.remove_file(relative)
            return self.write_file(relative, current)

    def remove_committed(self, relative: str) -> bool:
        """Delete a file after the commit that erased its resource (as `write_committed`
        decides: where the store is shared, only if the database has no revision for it now).
        Whether one was there."""
        if self._coherence is None or not self._coherence.shared:
            return self.remove_file(relative)
        with self.files_locked():
            current = self._readers.read_now(
                lambda connection: resource_store.current_content(connection, relative)
            )
            if current is not None:
                self.write_file(relative, current)
                return False
            return self.remove_file(relative)

    # --- convergence after a fault ----------------------------------------------------------

    async def keep_converged(self) -> None:
        """Rewrite stale files from their current revision, every HEAL_SECONDS while any is
        stale (until cancelled); a file whose storage is still away stays stale."""
        while True:
            await asyncio.sleep(HEAL_SECONDS)
            if self.stale:
                await asyncio.to_thread(self.heal)

    def heal(self) -> int:
        """One pass over the stale files: each rewritten from (or, its resource gone, removed
        as) its current revision. Returns how many converged."""
        with self._stale_lock:
            stale = sorted(self._stale)
        healed = 0
        for relative in stale:
            try:
                with self.files_locked():
                    current = self._readers.read_now(
                        functools.partial(_current_content, relative=relative)
                    )
                    if current is None:
                        self.remove_file(relative)
                        written = True
                    else:
                        written = self.write_file(relative, current)
            except (MemorydError, OSError):
                continue  # still away: the next pass tries again
            if written:
                healed += 1
                with self._stale_lock:
                    self._stale.discard(relative)
        if healed:
            log.info(
                "rewrote %d prompt file(s) from their current revision after a failed write",
                healed,
                extra={"event": Event.PROMPT_FILES_HEALED, "files": healed},
            )
        return healed

    @contextlib.contextmanager
    def files_locked(self) -> Iterator[None]:
        """The data directory's prompt-file lock, held by one process at a time."""
        descriptor = os.open(self._home / PROMPT_FILES_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)

    def write_file(self, relative: str, content: str) -> bool:
        """Temp file + rename: readers see the old file or the new one, never a mix.

        Never raises: a file that cannot be written is logged and left to the next start's
        resync. Returns whether it was written.
        """
        target = self._home / relative
        temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with temp.open("w", encoding="utf-8", newline="") as handle:
                handle.write(content)
            temp.replace(target)
        except OSError as error:
            with contextlib.suppress(OSError):
                temp.unlink(missing_ok=True)
            log.error(  # noqa: TRY400 - the reason is enough; a traceback adds nothing here
                "could not write %s (%s); it is rewritten from its revision as soon as it can be",
                target,
                error.strerror or error,
                extra={"event": Event.PROMPT_FILE_WRITE_FAILED, "path": str(target)},
            )
            return False
        return True

    # --- reads -----------------------------------------------------------------------------------

    async def context_for(self, owner: OwnerKey, trust: Trust) -> PromptState | None:
        """The owner's prompt files for the next model call; None for a guest, from whom the
        owner's profile and the agent's notes are withheld."""
        if trust is Trust.GUEST:
            return None
        return await self.state(owner)

    async def state(self, owner: OwnerKey) -> PromptState:
        """The owner's prompt files as last committed (cached until a change)."""
        if self._coherence is not None:
            await self._coherence.check()
        cached = self.cache.get(owner)
        if cached is not None:
            return cached
        token = self.cache.begin()
        loaded = await self._readers.read(lambda connection: load_state(connection, owner))
        self.cache.fill(owner, loaded, token)
        return loaded

    # --- start-up --------------------------------------------------------------------------------

    def resync(self, database: OpenedDatabase) -> ResyncReport:
        """Make every prompt file equal its current revision, at the path its key maps to.

        Runs at start-up, before the writer owns the connection. A resource whose recorded path
        is not the one its identifiers map to today (an older encoding) moves there: the row is
        updated and the old file removed. A file that cannot be written is logged and counted,
        never fatal: SQLite is the truth, and GetPromptContext serves it regardless.
        """
        report = ResyncReport()
        self._remove_stray_temp_files()
        for stored_path, revision in resource_store.all_current(database.autocommit, PROMPT_TYPES):
            key = revision.key
            path = prompt_file_path(key.agent_id, key.scope_id, key.resource_type)
            if path != stored_path:
                with database.transaction() as transaction:
                    resource_store.set_path(transaction, key, path)
                self._remove_old_file(stored_path)
                report.moved += 1
            target = self._home / path
            try:
                on_disk = target.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                on_disk = None
            if on_disk == revision.content:
                continue
            if self.write_file(path, revision.content):
                report.rewritten += 1
            else:
                report.failed += 1
        return report

    def _remove_stray_temp_files(self) -> None:
        memory_root = self._home / "memory"
        try:
            for stray in memory_root.rglob(f".*{TEMP_SUFFIX}"):
                stray.unlink(missing_ok=True)
        except OSError as error:
            log.warning(
                "could not remove stray temp files under %s: %s",
                memory_root,
                error,
                extra={"event": Event.PROMPT_FILE_CLEANUP_FAILED},
            )

    def _remove_old_file(self, relative: str) -> None:
        self.remove_file(relative)

    def remove_file(self, relative: str) -> bool:
        """Delete a prompt file (an erased owner's); whether one was there."""
        old = self._home / relative
        try:
            old.unlink()
        except FileNotFoundError:
            return False
        except OSError:  # an unreadable old path (too long for the filesystem): nothing there
            return False
        return True


def _current_content(connection: Transaction, *, relative: str) -> str | None:
    return resource_store.current_content(connection, relative)

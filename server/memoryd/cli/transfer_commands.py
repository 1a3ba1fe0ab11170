"""`memoryd export` and `memoryd import`: JSON Lines of everything an agent (or one owner) holds,
through ExportData and ImportData.

An export is written to a temporary file beside FILE and renamed when complete (mode 0600), so a
cut-off export never leaves a file that looks whole; without FILE it goes to stdout. On a
terminal both show a progress bar (records/s, ETA) on stderr; elsewhere a plain progress line
every few seconds. The summary goes to stdout, or to stderr when stdout carries the export;
`--json` prints it as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast

import memoryd_client as md

if TYPE_CHECKING:
    from tqdm import tqdm

CHUNK_LINES = 2000
CHUNK_CHARS = 1024 * 1024
PLAIN_EVERY_SECONDS = 5.0


class Stubs(Protocol):
    """The services these commands call (remote.Stubs)."""

    api: md.SyncStubs


def add_commands(commands: Any, common: Any) -> None:
    """Add `export` and `import` to the top-level parser; `common` adds --address and --json."""
    export = commands.add_parser(
        "export", help="write every record of an agent or owner as JSON Lines"
    )
    common(export)
    export.add_argument("--agent", default="", help="only this agent (default every agent)")
    export.add_argument("--owner", default="", help="only this owner (default every owner)")
    export.add_argument("file", nargs="?", default="-", help="where to write (default stdout)")
    export.set_defaults(run=export_command)

    imported = commands.add_parser("import", help="read an export back into the server")
    common(imported)
    imported.add_argument("file", help="the export to read ('-' for stdin)")
    imported.add_argument(
        "--agent",
        default="",
        help="hold the import to this agent: a record of another is refused (and a token of "
        "this agent alone may import)",
    )
    imported.add_argument(
        "--as-reviewed",
        action="store_true",
        help="store messages as already reviewed where the file carries no review state of "
        "their conversation (old history that should cost no model calls)",
    )
    imported.set_defaults(run=import_command)


class Progress:
    """A tqdm bar on a terminal; elsewhere a plain line every few seconds and at the end."""

    def __init__(self, what: str, stream: TextIO) -> None:
        self._what = what
        self._stream = stream
        self._bar: tqdm[Any] | None = None
        if stream.isatty():
            from tqdm import tqdm  # noqa: PLC0415 - only on a terminal: every command imports this

            self._bar = tqdm(unit=" records", unit_scale=True, desc=what, file=stream)
        self._done = 0
        self._total = 0
        self._said_at = time.monotonic()

    @property
    def done(self) -> int:
        """How many records are done so far."""
        return self._done

    def total(self, total: int) -> None:
        """How many records there are (once known)."""
        self._total = total
        if self._bar is not None:
            self._bar.reset(total=total)
            self._bar.update(self._done)

    def advance(self, records: int) -> None:
        """`records` more are done."""
        self._done += records
        if self._bar is not None:
            self._bar.update(records)
        elif time.monotonic() - self._said_at >= PLAIN_EVERY_SECONDS:
            self._say()

    def close(self, *, finished: bool) -> None:
        """The end: the bar closes; a plain line says the last count, when the transfer
        finished (a failed one says only why it failed)."""
        if self._bar is not None:
            self._bar.close()
        elif finished:
            self._say()

    def _say(self) -> None:
        self._said_at = time.monotonic()
        of = f" of {self._total:,}" if self._total else ""
        self._stream.write(f"{self._what}: {self._done:,}{of} records\n")
        self._stream.flush()


def export_command(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """Stream the export into FILE (renamed into place when complete) or stdout."""
    to_stdout = args.file == "-"
    talk = sys.stderr if to_stdout else out
    folder = Path(args.file).resolve().parent
    if not to_stdout and not folder.is_dir():  # before anything is asked of the server
        raise FileNotFoundError(errno.ENOENT, "no such folder", str(folder))
    progress = Progress("export", sys.stderr)
    started = time.monotonic()
    request = md.ExportDataRequest(agent_id=args.agent, owner_id=args.owner)
    records = 0
    finished = False
    try:
        with _destination(args.file, out) as target:
            for chunk in stubs.api.admin.ExportData(request):
                if not records and chunk.total_records:
                    progress.total(chunk.total_records)
                for line in chunk.lines:
                    target.write(line + "\n")
                done = len(chunk.lines) - (1 if records == 0 and chunk.lines else 0)
                records += len(chunk.lines)
                progress.advance(done)
        finished = True
    finally:
        progress.close(finished=finished)
    summary = {
        "records": max(records - 1, 0),
        "file": "" if to_stdout else str(Path(args.file).resolve()),
        "seconds": round(time.monotonic() - started, 3),
    }
    if args.json:
        talk.write(json.dumps(summary, indent=2) + "\n")
    else:
        where = "stdout" if to_stdout else summary["file"]
        talk.write(f"exported {summary['records']:,} records to {where}\n")
    return 0


def import_command(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """Stream FILE's lines to ImportData and print what was stored."""
    progress = Progress("import", sys.stderr)
    started = time.monotonic()
    source: TextIO
    if args.file == "-":
        source = sys.stdin
    else:
        source = Path(args.file).open(encoding="utf-8", newline="\n")  # noqa: SIM115
        progress.total(max(_count_lines(Path(args.file)) - 1, 0))
    finished = False
    try:
        with source:
            response = stubs.api.admin.ImportData(
                _chunks(source, progress, as_reviewed=args.as_reviewed, agent_id=args.agent)
            )
        finished = True
    finally:
        progress.close(finished=finished)
    if args.json:
        summary = {
            "lines": response.lines,
            "stored": response.stored,
            "present": response.present,
            "stored_as_reviewed": response.stored_as_reviewed,
            "records": [
                {"record": item.record, "stored": item.stored, "present": item.present}
                for item in response.records
            ],
            "seconds": round(time.monotonic() - started, 3),
        }
        out.write(json.dumps(summary, indent=2) + "\n")
        return 0
    out.write(
        f"imported {response.stored:,} records ({response.present:,} already present) from "
        f"{response.lines:,} lines\n"
    )
    for item in response.records:
        out.write(f"  {item.record}\t{item.stored:,} stored\t{item.present:,} present\n")
    if args.as_reviewed:
        out.write(f"  {response.stored_as_reviewed:,} messages stored as already reviewed\n")
    return 0


@contextlib.contextmanager
def _destination(file: str, stdout: TextIO) -> Iterator[TextIO]:
    if file == "-":
        yield stdout
        stdout.flush()
        return
    target = Path(file)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed into place below
        "w",
        encoding="utf-8",
        newline="\n",
        dir=target.resolve().parent,
        prefix=f".{target.name}.",
        suffix=".partial",
        delete=False,
    )
    try:
        with handle:  # created 0600 (mkstemp)
            yield cast("TextIO", handle)
            handle.flush()
            os.fsync(handle.fileno())
        Path(handle.name).replace(target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def _chunks(
    source: TextIO, progress: Progress, *, as_reviewed: bool = False, agent_id: str = ""
) -> Iterator[md.ImportDataRequest]:
    lines: list[str] = []
    size = 0
    first = True
    for raw in source:
        line = raw.removesuffix("\n").removesuffix("\r")
        if len(lines) >= CHUNK_LINES or (lines and size + len(line) > CHUNK_CHARS):
            # The first request names the agent; the later ones are held to it.
            yield md.ImportDataRequest(
                lines=lines, as_reviewed=as_reviewed, agent_id=agent_id if first else ""
            )
            progress.advance(len(lines) - (1 if first else 0))
            first = False
            lines, size = [], 0
        lines.append(line)
        size += len(line)
    if lines:
        yield md.ImportDataRequest(
            lines=lines, as_reviewed=as_reviewed, agent_id=agent_id if first else ""
        )
        progress.advance(len(lines) - (1 if first else 0))


def _count_lines(path: Path) -> int:
    count = 0
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            count += block.count(b"\n")
    return count

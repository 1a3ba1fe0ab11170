"""PostgreSQL's transient failures and refused values, added to storage's tables
(memoryd.storage.errors) when the driver loads: imported by the module that wraps its
connections (memoryd.storage.postgres.transaction), so a server on SQLite never loads psycopg."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg

from memoryd.storage import errors

TRANSIENT: dict[type[Exception], str] = {
    pg.SerializationFailure: "the database is busy (a conflicting transaction)",
    pg.DeadlockDetected: "the database is busy (a deadlock was broken)",
    pg.LockNotAvailable: "the database is locked",
    pg.QueryCanceled: "the database cancelled the statement (statement_timeout)",
    pg.DiskFull: "the database's disk is full",
    pg.AdminShutdown: "PostgreSQL is shutting down",
    pg.CannotConnectNow: "PostgreSQL is starting up",
    psycopg.OperationalError: "PostgreSQL is unreachable",
    psycopg.InterfaceError: "the connection to PostgreSQL was lost",
}
# A constraint, or a value its column's type cannot hold (SQLite's STRICT tables count that as
# a constraint).
CONSTRAINT = (pg.IntegrityError, pg.DataError)

errors.recognise(TRANSIENT, CONSTRAINT)

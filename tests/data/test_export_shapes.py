"""Every column of every exported table is exported, derived again, or deliberately kept out:
a migration that adds a column cannot silently leave it out of exports."""

from __future__ import annotations

import apsw
import pytest

from memoryd.domain.export_shapes import SHAPES, Kind
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.migrations import bundled_migrations, migrate
from memoryd.storage.transfer_store import RESOURCE_KEY, TABLES


@pytest.fixture(scope="module")
def schema() -> apsw.Connection:
    connection = SqliteConnection(":memory:")
    migrate(connection, bundled_migrations())
    return connection


@pytest.mark.parametrize("kind", list(Kind), ids=lambda kind: kind.value)
def test_an_export_shape_names_every_column_of_its_table(
    schema: apsw.Connection, kind: Kind
) -> None:
    table = TABLES[kind].table
    columns = {row[1] for row in schema.execute(f"PRAGMA table_xinfo({table})")}
    shape = SHAPES[kind]
    named = [*shape.columns, *shape.derived, *shape.kept_out]
    if kind is Kind.RESOURCE_REVISION:  # its resource's key is read from the resource
        named = [column for column in named if column not in RESOURCE_KEY]
    assert len(named) == len(set(named)), f"{kind.value}: a column named twice"
    assert set(named) == columns, (
        f"{kind.value}: not in the shape {sorted(columns - set(named))}, "
        f"not in the table {sorted(set(named) - columns)}"
    )

"""The shape of the code, kept by tests: every unit of server/memoryd stands on a floor and
imports only from floors below it, some layers keep third-party libraries out, only storage knows
the database, no code outside the storage engines asks which engine it is (nor loads
PostgreSQL's driver on SQLite), every RPC of the
contract has a handler, and every enum table covers its protobuf
enum and its domain enum."""

from __future__ import annotations

import ast
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memoryd.api import contract, enum_tables
from memoryd.errors import InvalidArgument
from memoryd_client.v2 import records_pb2

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "memoryd"
# Every unit of the package (a folder, or a module at its top) on a floor: a unit imports only
# units on floors below its own. A new unit must be given a floor here before any test passes.
FLOORS = {
    "errors": 0,
    "log_events": 0,
    "signal_flags": 0,  # what a signal handler may touch: no lock
    "hangups": 1,  # SIGHUP held before anything else is imported (the command's first line)
    "domain": 1,
    "testing": 1,  # helpers for tests that start servers; no unit of the server imports them
    "log_names": 2,
    "data_directory": 2,
    "logs": 2,
    "web": 2,  # HTTP serving for every listener, knowing nothing of what it serves
    "config": 3,
    "observability": 4,
    "storage": 5,
    "llm": 5,
    "services": 6,
    "runtime": 7,
    "api": 8,
    "console": 9,
    "mcp_bridge": 9,  # a client of a running memoryd, over gRPC
    "serving": 10,
    "supervisor": 11,
    "server": 12,
    "cli": 13,
    "entry": 14,  # the `memoryd` command: SIGHUP held, then the command line
    "__main__": 15,
}
# Units no other unit may import.
LEAVES = ("testing", "__main__")
# What each layer must never import (a module, or any module below it), besides the floors.
FORBIDDEN = {
    "domain": (
        "grpc",
        "apsw",
        "openai",
        "memoryd_client",
        "memoryd.config",
        "memoryd.api",
        "memoryd.services",
        "memoryd.storage",
        "memoryd.llm",
    ),
    "storage": (
        "grpc",
        "openai",
        "memoryd_client",
        "memoryd.api",
        "memoryd.services",
        "memoryd.llm",
    ),
    "llm": ("grpc", "apsw", "memoryd_client", "memoryd.api", "memoryd.services", "memoryd.storage"),
    "services": (
        "grpc",
        "apsw",
        "memoryd_client",
        "memoryd.api",
        "memoryd.storage.connection.open_connection",
        "memoryd.storage.connection.reader_policy",
        "memoryd.storage.connection.writer_policy",
    ),
    "api": ("apsw", "openai", "memoryd.storage", "memoryd.llm"),
    # HTTP serving for every listener (the API's, the metrics', MCP's): no knowledge of what
    # it serves.
    "web": (
        "grpc",
        "apsw",
        "openai",
        "memoryd_client",
        "memoryd.config",
        "memoryd.api",
        "memoryd.services",
        "memoryd.storage",
        "memoryd.llm",
        "memoryd.mcp_bridge",
        "memoryd.console",
    ),
    # A client of a running memoryd, over gRPC: none of the server's insides.
    "mcp_bridge": (
        "apsw",
        "openai",
        "memoryd.api",
        "memoryd.services",
        "memoryd.storage",
        "memoryd.llm",
    ),
    # Metrics and traces are recorded by every layer: no database, no model, no gRPC.
    "observability": ("grpc", "apsw", "openai", "memoryd_client"),
    # The console calls the API's handlers like any transport: never the database or a model.
    "console": ("grpc", "apsw", "openai", "memoryd_client"),
}
# The layers above storage: no SQL, no apsw (FORBIDDEN), no connection of their own.
ABOVE_STORAGE = ("services", "api")
# A string that is SQL: a statement's first word, or a clause naming a table or column.
SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK"
    r"|SAVEPOINT|RELEASE|WITH|VACUUM)\b|\b(FROM|WHERE|SET|VALUES|JOIN)\s+[a-z_]+"
)
# Calls that open a database connection.
OPENERS = ("open_connection", "Connection", "connect")


def _imports(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def _violations(layer: str) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for line, module in _imports(path)
        if any(module == banned or module.startswith(f"{banned}.") for banned in FORBIDDEN[layer])
    ]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_none_of_what_it_must_not(layer: str) -> None:
    assert _violations(layer) == []


def _unit(package: Path, path: Path) -> str:
    return path.relative_to(package).parts[0].removesuffix(".py")


def _floor_violations(package: Path) -> list[str]:
    """Units without a floor, and imports of a unit on the same floor or above, or of a leaf."""
    units = {_unit(package, path) for path in package.rglob("*.py")} - {"__init__"}
    found = [f"{unit} has no floor" for unit in sorted(units - set(FLOORS))]
    for path in sorted(package.rglob("*.py")):
        unit = _unit(package, path)
        if unit not in FLOORS:
            continue
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] != "memoryd" or len(parts) < 2 or parts[1] not in FLOORS:
                continue
            target = parts[1]
            if target != unit and (target in LEAVES or FLOORS[target] >= FLOORS[unit]):
                found.append(
                    f"{path.relative_to(package)}:{line} imports memoryd.{target} "
                    f"({unit} on floor {FLOORS[unit]}, {target} on {FLOORS[target]})"
                )
    return sorted(set(found))


def test_every_unit_stands_on_a_floor_and_imports_only_downwards() -> None:
    assert _floor_violations(PACKAGE) == []


def test_the_floor_check_fails_on_a_broken_copy(tmp_path: Path) -> None:
    # A copy of the package with one import up the floors and one unit without a floor.
    copy = tmp_path / "memoryd"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    levels = copy / "observability" / "metrics.py"
    levels.write_text(levels.read_text() + "\nfrom memoryd.runtime import Runtime\n")
    (copy / "gadgets.py").write_text('"""A unit nobody placed."""\n')
    (copy / "domain" / "probe.py").write_text("from memoryd.testing import postgres\n")
    found = _floor_violations(copy)
    assert "gadgets has no floor" in found
    lines = len(levels.read_text().splitlines())
    assert found == [
        "domain/probe.py:1 imports memoryd.testing (domain on floor 1, testing on 1)",
        "gadgets has no floor",
        (
            f"observability/metrics.py:{lines} imports memoryd.runtime "
            "(observability on floor 4, runtime on 7)"
        ),
    ]


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _database_uses(path: Path) -> list[str]:
    """SQL string constants (docstrings aside) and connection openers in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and SQL.search(node.value)
        ):
            found.append(f"{path.name}:{node.lineno} SQL {node.value[:40]!r}")
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in OPENERS:
                found.append(f"{path.name}:{node.lineno} opens a connection ({name})")
    return found


@pytest.mark.parametrize("layer", ABOVE_STORAGE)
def test_only_storage_writes_sql_and_opens_connections(layer: str) -> None:
    assert [
        use for path in sorted((PACKAGE / layer).rglob("*.py")) for use in _database_uses(path)
    ] == []


def test_the_database_check_sees_sql_and_openers(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        '"""SELECT in a docstring is prose."""\n'
        'COUNT = "SELECT count(*) FROM messages"\n'
        'def f(c):\n    c.execute("UPDATE memories SET value = ?")\n'
        '    return "the value set by the user", open_connection(s), apsw.Connection(p)\n'
    )
    assert _database_uses(module) == [
        "probe.py:2 SQL 'SELECT count(*) FROM messages'",
        "probe.py:4 SQL 'UPDATE memories SET value = ?'",
        "probe.py:5 opens a connection (open_connection)",
        "probe.py:5 opens a connection (Connection)",
    ]


# Storage stores: who may change what (a guest, a paused job, a job's run summary) is decided
# above it (memoryd.services.memory_changes and the use cases), so it imports none of the
# domain's checks and refuses nothing for a caller's rights.
def _decisions(path: Path) -> list[str]:
    """The rules of the domain a module applies: `check_*` imported from memoryd.domain, and
    PermissionDenied raised."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memoryd.domain"):
            found += [
                f"{path.name}:{node.lineno} imports {alias.name}"
                for alias in node.names
                if alias.name.startswith("check_")
            ]
        if isinstance(node, ast.ImportFrom) and node.module == "memoryd.errors":
            found += [
                f"{path.name}:{node.lineno} imports {alias.name}"
                for alias in node.names
                if alias.name == "PermissionDenied"
            ]
    return found


def test_storage_decides_no_callers_rights() -> None:
    assert [
        use for path in sorted((PACKAGE / "storage").rglob("*.py")) for use in _decisions(path)
    ] == []


def test_the_decision_check_sees_a_rule(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "from memoryd.domain.memories import MemoryRecord, check_guest_may_change\n"
        "from memoryd.errors import NotFound, PermissionDenied\n"
    )
    assert _decisions(module) == [
        "probe.py:1 imports check_guest_may_change",
        "probe.py:2 imports PermissionDenied",
    ]


# One database seam: which engine a store runs on is decided once (memoryd.storage.engine), and
# what differs is the engines' to say. Outside the engine's modules, and the configuration that
# names a backend, no code asks which engine it is: no comparison with a backend's name, no
# isinstance of a backend's settings, no import of PostgreSQL's modules but its settings.
ENGINE_MODULES = (
    "storage/engine.py",
    "storage/location.py",
    "storage/sqlite_engine.py",
    "storage/fts5_words.py",
    "storage/postgres/",
    "config/",
    "testing/",
)
BACKEND_NAMES = frozenset({"sqlite", "postgres", "postgresql"})
BACKEND_SETTINGS = frozenset({"ConnectionSettings", "PostgresSettings"})


def _backend_branches(path: Path, name: str) -> list[str]:
    """Where a module asks which engine it runs on (see ENGINE_MODULES)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(
                isinstance(operand, ast.Constant) and str(operand.value).lower() in BACKEND_NAMES
                for operand in operands
            ):
                found.append(f"{name}:{node.lineno} compares with a backend's name")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and {sub.id for sub in ast.walk(node.args[1]) if isinstance(sub, ast.Name)}
            & BACKEND_SETTINGS
        ):
            found.append(f"{name}:{node.lineno} asks whose settings these are")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "memoryd.storage.postgres"
        ):
            names = {alias.name for alias in node.names}
            if node.module != "memoryd.storage.postgres.settings" and not (
                node.module == "memoryd.storage.postgres" and names == {"settings"}
            ):
                found.append(f"{name}:{node.lineno} imports {node.module}")
    return found


def test_no_code_outside_the_engines_asks_which_engine_it_is() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if not name.startswith(ENGINE_MODULES):
            found += _backend_branches(path, name)
    assert found == []


def test_the_engine_check_sees_each_kind_of_branch(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "from memoryd.storage.postgres import words\n"
        "from memoryd.storage.postgres.settings import PostgresSettings\n"
        "if settings.storage.backend == 'postgres':\n"
        "    pass\n"
        "if isinstance(location, PostgresSettings):\n"
        "    pass\n"
        "if engine.name != 'sqlite':\n"
        "    pass\n"
    )
    assert _backend_branches(module, "probe.py") == [
        "probe.py:1 imports memoryd.storage.postgres",
        "probe.py:3 compares with a backend's name",
        "probe.py:5 asks whose settings these are",
        "probe.py:7 compares with a backend's name",
    ]


# The tables an engine's driver extends when it loads (memoryd.storage.errors.recognise): a name
# imported from there is the table as it was at that import, without the driver's failures.
EXTENDED_TABLES = {"TRANSIENT", "TRANSIENT_ERRORS", "CONSTRAINT_ERRORS"}


def _tables_imported_by_name(path: Path, name: str) -> list[str]:
    return [
        f"{name}:{node.lineno} imports {alias.name}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "memoryd.storage.errors"
        for alias in node.names
        if alias.name in EXTENDED_TABLES
    ]


def test_the_tables_of_transient_failures_are_read_when_a_failure_is_caught() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += _tables_imported_by_name(path, path.relative_to(PACKAGE).as_posix())
    assert found == []


def test_the_table_check_sees_a_table_imported_by_name(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("from memoryd.storage.errors import TRANSIENT_ERRORS, unavailable\n")
    assert _tables_imported_by_name(module, "probe.py") == ["probe.py:1 imports TRANSIENT_ERRORS"]


@pytest.mark.slow
def test_a_store_on_sqlite_never_loads_postgresqls_driver(tmp_path: Path) -> None:
    """What `memoryd serve` imports and opens, on SQLite: the driver's import was a tenth of a
    second of every start."""
    program = textwrap.dedent(
        """
        import asyncio, sys
        import memoryd.cli.main, memoryd.server
        from memoryd.config.loading import load_settings
        from memoryd.runtime import Runtime

        async def opened_and_closed():
            runtime = Runtime.open(load_settings({}, home=sys.argv[1]), {})
            await runtime.close()

        asyncio.run(opened_and_closed())
        print(sorted(name for name in sys.modules if name.startswith("psycopg")))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={name: value for name, value in os.environ.items() if not name.startswith("MEMORYD_")},
    )
    assert result.stdout == "[]\n"


# A module that says what it holds stays readable in one sitting.
MAX_MODULE_LINES = 400


def test_no_module_is_longer_than_its_share() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these modules by what they hold: {long}"


def test_the_import_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    # The check itself must be able to fail: both import forms are seen, relative ones are not.
    module = tmp_path / "probe.py"
    module.write_text("import apsw\nfrom memoryd.storage import sql\nfrom . import sibling\n")
    assert [name for _, name in _imports(module)] == [
        "apsw",
        "memoryd.storage",
        "memoryd.storage.sql",
    ]


@pytest.mark.parametrize("service", contract.SERVICES, ids=lambda service: service.name)
def test_every_rpc_of_the_contract_has_a_handler(service: contract.Service) -> None:
    # A misspelt method would leave the generated base's, which answers UNIMPLEMENTED.
    servicer = service.servicer
    assert isinstance(servicer, type)
    base = getattr(service.stubs, f"{service.descriptor.name}Servicer")
    assert issubclass(servicer, base)
    methods = service.descriptor.methods_by_name
    unimplemented = [
        method for method in methods if getattr(servicer, method) is getattr(base, method)
    ]
    assert unimplemented == []
    handlers = {
        member
        for member, value in inspect.getmembers(servicer, inspect.isfunction)
        if member[:1].isupper()
    }
    assert handlers - set(methods) == set(), "a handler that no RPC of the contract calls"


@pytest.mark.parametrize("name", sorted(enum_tables.TABLES))
def test_an_enum_table_covers_its_enum_in_both_directions(name: str) -> None:
    table = enum_tables.TABLES[name]
    declared = {number for _, number in table.proto.items() if number}
    assert set(table.values) - {0} == declared
    if table.domain is not None:
        assert set(table.numbers) == set(table.domain)
    for number in declared:
        assert table.number(table.value(number, "field")) == number
    unknown = max(declared) + 1
    with pytest.raises(InvalidArgument, match=f"field has unknown value {unknown}"):
        table.value(unknown, "field")


def test_every_enum_of_the_contract_has_a_table() -> None:
    declared = {
        enum.full_name
        for module in (records_pb2, *(service.messages for service in contract.SERVICES))
        for enum in module.DESCRIPTOR.enum_types_by_name.values()
    }
    tabled = {table.proto.DESCRIPTOR.full_name for table in enum_tables.TABLES.values()}
    assert declared == tabled

"""Write the generated parts of docs/ from their sources, or check that they are current.

    .venv/bin/python scripts/gen_docs.py          # rewrite them
    .venv/bin/python scripts/gen_docs.py --check  # exit 1 naming each stale file (make test)

Each generated part sits between `<!-- NAME:start -->` and `<!-- NAME:end -->` markers in a
hand-written page, so the prose around it stays the author's:
    docs/api.md            `api`: every service, RPC, message and enum of memoryd.v2, with the
                           protos' own comments (from the descriptor set built with source info)
                           `routes`: each memoryd.v1 RPC and the memoryd.v2 RPC that answers it
    docs/configuration.md  `settings`: every [memoryd.*] setting, its type, default and the
                           comment above its field in its section's module (memoryd/config/)
    docs/security.md       `access`: who may call each RPC, from its service's and its own
                           declarations ((memoryd.v2.service_access), (memoryd.v2.access))
    ARCHITECTURE.md        `contract`: the services and their RPCs, counted, from the descriptors
                           `units`: each unit of server/memoryd and the units it imports
                           `tables`: the tables after every migration, with their keys and
                           indexes (SQLite's; tests/storage/test_schema_parity.py holds
                           PostgreSQL's to the same)
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import io
import sys
import tokenize
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_ROOT = ROOT / "server" / "memoryd"
DESCRIPTOR_SET = ROOT / "clients/python/memoryd_client/descriptor_set.binpb"
PACKAGE = "memoryd.v2"

# Field numbers of descriptor.proto, as source-code-info paths name them.
MESSAGE_TYPE, ENUM_TYPE, SERVICE = 4, 5, 6
MESSAGE_FIELD, MESSAGE_NESTED, MESSAGE_ENUM = 2, 3, 4
ENUM_VALUE, SERVICE_METHOD = 2, 2


# --- the API reference ---------------------------------------------------------------------------


class _Comments:
    """The leading comment of each element of one .proto file, by its source path."""

    def __init__(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        self._by_path = {
            tuple(location.path): location.leading_comments
            for location in file.source_code_info.location
        }

    def of(self, *path: int) -> str:
        text = self._by_path.get(tuple(path), "")
        lines = text.strip("\n").split("\n")
        return "\n".join(line.removeprefix(" ") for line in lines).strip()


_SCALARS = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in descriptor_pb2.FieldDescriptorProto.Type.items()
}


def _type_name(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type_name:
        name = field.type_name.removeprefix(f".{PACKAGE}.").lstrip(".")
        return f"[{name}](#{_anchor(name)})" if not name.startswith("google.") else f"`{name}`"
    return f"`{_SCALARS[field.type]}`"


def _anchor(name: str) -> str:
    return name.lower().replace(".", "")


def _cell(text: str) -> str:
    """A comment as one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _message(
    lines: list[str],
    message: descriptor_pb2.DescriptorProto,
    comments: _Comments,
    path: tuple[int, ...],
    prefix: str,
) -> None:
    name = f"{prefix}{message.name}"
    if message.options.map_entry:  # a map field's entry: the field names its types already
        return
    lines += [f"### {name}", ""]
    described = comments.of(*path)
    if described:
        lines += [described, ""]
    if message.field:
        lines += ["| field | type | description |", "|---|---|---|"]
        for index, field in enumerate(message.field):
            kind = _type_name(field)
            if field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED:
                kind = f"repeated {kind}"
            if field.HasField("oneof_index") and not field.proto3_optional:
                kind += f" (oneof `{message.oneof_decl[field.oneof_index].name}`)"
            if field.options.deprecated:
                kind += " (deprecated)"
            comment = _cell(comments.of(*path, MESSAGE_FIELD, index))
            lines.append(f"| `{field.name}` | {kind} | {comment} |")
        lines.append("")
    for index, nested in enumerate(message.nested_type):
        _message(lines, nested, comments, (*path, MESSAGE_NESTED, index), f"{name}.")
    for index, enum in enumerate(message.enum_type):
        _enum(lines, enum, comments, (*path, MESSAGE_ENUM, index), f"{name}.")


def _enum(
    lines: list[str],
    enum: descriptor_pb2.EnumDescriptorProto,
    comments: _Comments,
    path: tuple[int, ...],
    prefix: str,
) -> None:
    lines += [f"### {prefix}{enum.name}", ""]
    described = comments.of(*path)
    if described:
        lines += [described, ""]
    lines += ["| value | number | description |", "|---|---|---|"]
    for index, value in enumerate(enum.value):
        comment = _cell(comments.of(*path, ENUM_VALUE, index))
        lines.append(f"| `{value.name}` | {value.number} | {comment} |")
    lines.append("")


def api_reference() -> str:
    """The reference of every memoryd.v2 file: its services in the contract's order, then the
    shared records and the access options."""
    from memoryd.api import contract  # noqa: PLC0415

    order = [service.messages.DESCRIPTOR.name for service in contract.SERVICES]
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR_SET.read_bytes()).file
    ours = sorted(
        (file for file in files if file.package == PACKAGE),
        key=lambda file: (order.index(file.name) if file.name in order else len(order), file.name),
    )
    lines: list[str] = []
    for file in ours:
        comments = _Comments(file)
        lines += [f"## {file.name.removeprefix('memoryd/v2/')}", ""]
        for s_index, service in enumerate(file.service):
            lines += [f"### service {service.name}", ""]
            described = comments.of(SERVICE, s_index)
            if described:
                lines += [described, ""]
            for m_index, method in enumerate(service.method):
                request = method.input_type.removeprefix(f".{PACKAGE}.")
                response = method.output_type.removeprefix(f".{PACKAGE}.")
                sends = "stream " if method.client_streaming else ""
                answers = "stream " if method.server_streaming else ""
                signature = f"`rpc {method.name}({sends}{request}) returns ({answers}{response})`"
                links = f"[{request}](#{_anchor(request)}) → [{response}](#{_anchor(response)})"
                lines += [f"#### {service.name}.{method.name}", "", f"{signature} — {links}", ""]
                described = comments.of(SERVICE, s_index, SERVICE_METHOD, m_index)
                if described:
                    lines += [described, ""]
        for index, message in enumerate(file.message_type):
            _message(lines, message, comments, (MESSAGE_TYPE, index), "")
        for index, enum in enumerate(file.enum_type):
            _enum(lines, enum, comments, (ENUM_TYPE, index), "")
    return "\n".join(lines).rstrip()


# --- the settings reference ----------------------------------------------------------------------


def _field_comments(source: str) -> dict[tuple[str, str], str]:
    """The comment block right above each field of each class, by (class, field). A field right
    below another, with no comment of its own, shares that one's (one comment for a group)."""
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.line.strip().startswith("#"):
            comments[token.start[0]] = token.string.lstrip("#").strip()
    found: dict[tuple[str, str], str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        previous: tuple[int, str] = (0, "")
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                block: list[str] = []
                line = statement.lineno - 1
                while line in comments:
                    block.insert(0, comments[line])
                    line -= 1
                text = " ".join(block)
                if not text and previous[0] == statement.lineno - 1:
                    text = previous[1]
                found[(node.name, statement.target.id)] = text
                previous = (statement.end_lineno or statement.lineno, text)
    return found


def _type_text(hint: Any) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{arg}"`' for arg in args)
    if type(None) in args:
        inner = next(arg for arg in args if arg is not type(None))
        return f'{_type_text(inner)} or `"unbounded"`'
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(hint, str(hint))


def _default_text(field: dataclasses.Field[Any]) -> str:
    if field.default is dataclasses.MISSING:
        return "required"
    value = field.default
    if value is None:
        return '`"unbounded"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def settings_reference() -> str:
    """One table per section: key, type, default, environment variable, and the field's comment."""
    from memoryd.config import SECTIONS, ProviderSettings  # noqa: PLC0415

    sources = {Path(inspect.getfile(cls)) for cls in (*SECTIONS.values(), ProviderSettings)}
    comments: dict[tuple[str, str], str] = {}
    for source in sorted(sources):
        comments |= _field_comments(source.read_text(encoding="utf-8"))
    tables: list[tuple[str, type[Any], str | None]] = [
        (f"[memoryd.{name}]", cls, f"MEMORYD_{name.upper()}_") for name, cls in SECTIONS.items()
    ]
    tables.append(("[[memoryd.providers]]", ProviderSettings, None))
    lines: list[str] = []
    for title, cls, prefix in tables:
        hints = typing.get_type_hints(cls)
        summary = (cls.__doc__ or "").split(":", 1)[-1].strip()
        lines += [f"### {title}", "", summary[:1].upper() + summary[1:], ""]
        header = "| key | type | default | meaning |"
        if prefix:
            header = "| key | type | default | environment | meaning |"
        lines += [header, "|---|---|---|---|" + ("---|" if prefix else "")]
        for field in dataclasses.fields(cls):
            comment = _cell(comments.get((cls.__name__, field.name), ""))
            if not comment:
                sys.exit(
                    f"{cls.__name__}.{field.name} has no comment above it in {inspect.getfile(cls)}"
                )
            cells = [f"`{field.name}`", _type_text(hints[field.name]), _default_text(field)]
            if prefix:
                cells.append(f"`{prefix}{field.name.upper()}`")
            lines.append("| " + " | ".join([*cells, comment]) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def access_table() -> str:
    """Who may call each RPC, from the contract's declarations."""
    from memoryd.api import contract  # noqa: PLC0415
    from memoryd.api.access import declarations, markdown_table  # noqa: PLC0415

    return markdown_table(declarations(contract.methods()).values())


def routes_table() -> str:
    """Each memoryd.v1 RPC and the memoryd.v2 RPC that answers it."""
    from memoryd.api import contract  # noqa: PLC0415

    lines = ["| memoryd.v1 | memoryd.v2 |", "|---|---|"]
    for legacy, current in contract.routes().items():
        old = legacy.removeprefix("/memoryd.v1.").replace("/", ".")
        new = current.removeprefix("/memoryd.v2.").replace("/", ".")
        lines.append(f"| `{old}` | `{new}` |")
    return "\n".join(lines)


# --- ARCHITECTURE.md ------------------------------------------------------------------------------


def contract_summary() -> str:
    """The services of the contract and their RPCs, counted."""
    from memoryd.api import contract  # noqa: PLC0415
    from memoryd.api.access import declared  # noqa: PLC0415

    services = [service.descriptor for service in contract.SERVICES]
    total = sum(len(service.methods) for service in services)
    lines = [
        f"memoryd.v2: {total} RPCs in {len(services)} services (besides health and reflection):",
        "",
    ]
    for service in services:
        names = ", ".join(method.name for method in service.methods)
        who = "admin" if declared(service.methods[0]).admin_only else "adapter or admin"
        lines.append(f"- `{service.name}` ({len(service.methods)}, {who}): {names}")
    legacy = ", ".join(f"`{service.name}` ({len(service.methods)})" for service in contract.LEGACY)
    lines += [
        "",
        f"memoryd.v1, still served, each RPC by the memoryd.v2 RPC of its name: {legacy}.",
    ]
    return "\n".join(lines)


def _unit(path: Path) -> str:
    return path.relative_to(PACKAGE_ROOT).parts[0].removesuffix(".py")


def units_table() -> str:
    """Each unit of server/memoryd (a folder, or a module at its top), its modules, and the
    units it imports."""
    imports: dict[str, set[str]] = {}
    modules: dict[str, int] = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        unit = _unit(path)
        if unit == "__init__":
            continue
        modules[unit] = modules.get(unit, 0) + 1
        found = imports.setdefault(unit, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0] == "memoryd" and len(parts) > 1 and parts[1] != unit:
                    target = PACKAGE_ROOT / parts[1]
                    if target.is_dir() or target.with_suffix(".py").is_file():
                        found.add(parts[1])
    rows = ["| unit | modules | imports |", "|---|---|---|"]
    for unit in sorted(imports, key=lambda name: (len(imports[name]), name)):
        used = ", ".join(f"`{name}`" for name in sorted(imports[unit])) or "none of memoryd"
        rows.append(f"| `{unit}` | {modules[unit]} | {used} |")
    return "\n".join(rows)


def tables_table() -> str:
    """The tables after every SQLite migration: primary key, unique keys, indexes."""
    from memoryd.storage.connection import SqliteConnection  # noqa: PLC0415
    from memoryd.storage.migrations import bundled_migrations, migrate  # noqa: PLC0415

    connection = SqliteConnection(":memory:")
    migrate(connection, bundled_migrations())
    rows = list(connection.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'"))
    virtual = {name for name, sql in rows if "VIRTUAL TABLE" in sql}
    lines = ["| table | primary key | unique keys | other indexes |", "|---|---|---|---|"]
    for name, _ in sorted(rows):
        if name in virtual or name.startswith("sqlite_"):
            continue
        if any(name.startswith(f"{table}_") for table in virtual):
            continue
        info = list(connection.execute(f"PRAGMA table_info({name})"))
        key = ", ".join(row[1] for row in sorted(info, key=lambda row: row[5]) if row[5])
        unique: list[str] = []
        others: list[str] = []
        for _, index, is_unique, origin, _ in connection.execute(f"PRAGMA index_list({name})"):
            columns = ", ".join(row[2] for row in connection.execute(f"PRAGMA index_info({index})"))
            if origin == "pk":
                continue
            (unique if is_unique else others).append(f"({columns})")
        lines.append(
            f"| `{name}` | {key or 'rowid'} | {'; '.join(sorted(unique)) or '-'} | "
            f"{'; '.join(sorted(others)) or '-'} |"
        )
    lines.extend(
        f"| `{name}` | FTS5, kept by triggers (PostgreSQL: a tsvector column or trigram index) "
        "| - | - |"
        for name in sorted(virtual)
    )
    connection.close()
    return "\n".join(lines)


# --- markers -------------------------------------------------------------------------------------

PARTS: tuple[tuple[str, str, Callable[[], str]], ...] = (
    ("docs/api.md", "routes", routes_table),
    ("docs/api.md", "api", api_reference),
    ("docs/configuration.md", "settings", settings_reference),
    ("docs/security.md", "access", access_table),
    ("ARCHITECTURE.md", "contract", contract_summary),
    ("ARCHITECTURE.md", "units", units_table),
    ("ARCHITECTURE.md", "tables", tables_table),
)


def replaced(text: str, name: str, body: str, page: str) -> str:
    """`text` with the part between NAME's markers replaced by `body`."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        sys.exit(f"{page} has no {start} ... {end} markers")
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    return f"{before}{start}\n{body}\n{end}{after}"


def stale_pages(parts: Iterable[tuple[str, str, Callable[[], str]]], *, write: bool) -> list[str]:
    """The pages whose generated part differs from a fresh generation (rewritten if `write`)."""
    stale = []
    for page, name, generate in parts:
        path = ROOT / page
        current = path.read_text(encoding="utf-8")
        fresh = replaced(current, name, generate(), page)
        if fresh != current:
            if page not in stale:
                stale.append(page)
            if write:
                path.write_text(fresh, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated parts, or with --check report the stale ones."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a page is stale")
    args = parser.parse_args(argv)
    stale = stale_pages(PARTS, write=not args.check)
    if args.check and stale:
        print(
            f"stale: {', '.join(stale)}; run .venv/bin/python scripts/gen_docs.py",
            file=sys.stderr,
        )
        return 1
    for page in stale:
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

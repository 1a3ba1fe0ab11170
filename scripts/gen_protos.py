"""Generate every client from protos/: Python, Go and TypeScript (`make protos`).

    python scripts/gen_protos.py          # regenerate
    python scripts/gen_protos.py --check  # exit 1 if any committed generated file is stale

Python: grpc_tools.protoc into clients/python/memoryd_client/v1/ and v2/, one folder per proto
package. protoc names Python modules after the proto package (memoryd.v2), which would collide
with the server package `memoryd`; the generated imports are therefore rewritten to
memoryd_client.v2. The proto file names registered in the descriptor pool stay
memoryd/v2/*.proto, as on the wire.

Go and TypeScript: `buf generate` with buf.gen.yaml (local plugins only: protoc-gen-go and
protoc-gen-go-grpc from .tools/bin, protoc-gen-es from clients/typescript/node_modules; `make
tools` installs them) into clients/go/gen/ and clients/typescript/src/gen/.

The Go module's path is one line: `module` in clients/go/go.mod. When it changes (the module
gets a fetchable home), this script makes everything else follow: buf.gen.yaml's
go_package_prefix, the generated code, and every import, `replace` and command that names the
old path (GO_FOLLOWERS); `--check` fails until it has.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import grpc_tools

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
CLIENT_DIR = ROOT / "clients" / "python" / "memoryd_client"
# The proto packages, each generated into a folder of the client named after it.
PACKAGES = ("v1", "v2")
SURFACE = CLIENT_DIR / "_surface.py"
# The package the client's surface (memoryd_client.<Name>) exports.
SURFACE_PACKAGE = "v2"
SURFACE_MODULES = (
    "records",
    "conversation_service",
    "memory_service",
    "context_service",
    "resource_service",
    "review_service",
    "overview_service",
    "admin_service",
)
# The folders buf.gen.yaml writes, relative to the repository.
BUF_OUTPUTS = ("clients/go/gen", "clients/typescript/src/gen")
GO_MODULE = ROOT / "clients" / "go" / "go.mod"
# buf.gen.yaml's go_package_prefix holds the module path the repository was last generated for.
GO_PREFIX_PATTERN = re.compile(r"(value: )(\S+)/gen$", re.MULTILINE)
# Where the Go module's path is written besides go.mod (the generated code follows buf.gen.yaml).
GO_FOLLOWERS = ("buf.gen.yaml", "bench/grpc_gateway", "clients/go", "docs/clients.md")
GO_FOLLOWER_SUFFIXES = (".go", ".mod", ".yaml", ".md")
# The descriptors of memoryd's protos with their comments (source info), shipped with the client.
DESCRIPTOR_SET = "descriptor_set.binpb"
INIT_TEXT = '"""Generated protobuf and gRPC modules for memoryd.{} (do not edit)."""\n'
# Only import statements and the module-name literals handed to the protobuf builder are
# rewritten; full names such as "/memoryd.v2.ConversationService/AppendMessages" are the wire
# contract.
IMPORT_PATTERN = re.compile(r"^(from|import) memoryd\.(v\d+)\b", re.MULTILINE)
MODULE_LITERAL_PATTERN = re.compile(r"'memoryd\.(v\d+)\.(\w+_pb2)'")


def _plugin(name: str) -> str:
    scripts = Path(sysconfig.get_path("scripts"))
    path = scripts / name
    if not path.exists():
        sys.exit(f"{name} not found in {scripts}: install the dev extras (pip install -e .[dev])")
    return str(path)


def generate(into: Path) -> dict[str, str]:
    """Run protoc into `into` and return {"v1/file name": rewritten text}; the descriptor set
    (every package's files) is left in `into` (DESCRIPTOR_SET)."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--python_out={into}",
        f"--grpc_python_out={into}",
        f"--mypy_out={into}",
        f"--mypy_grpc_out={into}",
        # Reflection serves the protos' comments from this set (memoryd.api.reflection).
        "--include_source_info",
        f"--descriptor_set_out={into / DESCRIPTOR_SET}",
        *protos,
    ]
    result = subprocess.run(command, cwd=PROTO_ROOT, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"protoc failed:\n{result.stderr}")
    files = {}
    for package in PACKAGES:
        files[f"{package}/__init__.py"] = INIT_TEXT.format(package)
        for path in sorted((into / "memoryd" / package).iterdir()):
            text = path.read_text(encoding="utf-8")
            text = IMPORT_PATTERN.sub(r"\1 memoryd_client.\2", text)
            text = MODULE_LITERAL_PATTERN.sub(r"'memoryd_client.\1.\2'", text)
            files[f"{package}/{path.name}"] = text
    return files


def stale_files(generated: dict[str, str], out_dir: Path) -> list[str]:
    """Files that differ between a fresh generation and `out_dir`'s package folders (missing
    or extra count too)."""
    committed = {
        f"{package}/{p.name}": p.read_text(encoding="utf-8")
        for package in PACKAGES
        for p in (out_dir / package).glob("*.py*")
    }
    names = generated.keys() | committed.keys()
    return sorted(name for name in names if generated.get(name) != committed.get(name))


def surface_text(files: dict[str, str]) -> str:
    """memoryd_client/_surface.py: every message, enum, enum value and stub of the generated
    modules, imported by name, read from the descriptors of a fresh generation."""
    with tempfile.TemporaryDirectory() as scratch:
        package = Path(scratch) / "memoryd_client"
        for name, text in files.items():
            (package / name).parent.mkdir(parents=True, exist_ok=True)
            (package / name).write_text(text, encoding="utf-8")
        (package / "__init__.py").write_text("", encoding="utf-8")
        code = (
            "import importlib, json, sys\n"
            f"sys.path.insert(0, {scratch!r})\n"
            "found = {}\n"
            f"for name in {SURFACE_MODULES!r}:\n"
            f"    module = importlib.import_module(f'memoryd_client.{SURFACE_PACKAGE}.'"
            "f'{name}_pb2')\n"
            "    names = list(module.DESCRIPTOR.message_types_by_name)\n"
            "    for enum in module.DESCRIPTOR.enum_types_by_name.values():\n"
            "        names += [enum.name, *(value.name for value in enum.values)]\n"
            "    stubs = [f'{service}Stub' for service in module.DESCRIPTOR.services_by_name]\n"
            "    found[name] = {'pb2': sorted(names), 'grpc': sorted(stubs)}\n"
            "print(json.dumps(found))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
    found = json.loads(result.stdout)
    lines = [
        (
            f'"""Every message, enum, enum value and stub of memoryd.{SURFACE_PACKAGE}, by name '
            "(generated by"
        ),
        'scripts/gen_protos.py from the descriptors; do not edit)."""',
        "",
    ]
    exported: list[str] = []
    for module, names in found.items():
        for kind in ("pb2", "grpc"):
            if names[kind]:
                suffix = "_pb2" if kind == "pb2" else "_pb2_grpc"
                lines.append(f"from memoryd_client.{SURFACE_PACKAGE}.{module}{suffix} import (")
                lines += [f"    {name}," for name in names[kind]]
                lines.append(")")
                exported += names[kind]
    lines += ["", "__all__ = ["]
    lines += [f'    "{name}",' for name in sorted(exported)]
    lines += ["]", ""]
    return "\n".join(lines)


def buf_binary() -> str:
    """buf from .tools/bin (`make tools`), else from PATH."""
    local = ROOT / ".tools" / "bin" / "buf"
    found = str(local) if local.exists() else shutil.which("buf")
    if found is None:
        sys.exit("buf not found: run `make tools`")
    return found


def generate_buf(into: Path) -> dict[str, str]:
    """Run buf.gen.yaml with `into` as the output base; {path relative to the repo: text}."""
    result = subprocess.run(
        [buf_binary(), "generate", "--template", "buf.gen.yaml", "--output", str(into)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"buf generate failed (run `make tools`?):\n{result.stderr}")
    return _tree(into)


def go_module() -> str:
    """The Go client's module path: the one line that names it."""
    found = re.search(r"^module (\S+)$", GO_MODULE.read_text(encoding="utf-8"), re.MULTILINE)
    if found is None:
        sys.exit(f"{GO_MODULE} has no module line")
    return found.group(1)


def go_path_followers() -> dict[Path, str]:
    """Every file that names the Go module's path, with the path as go.mod now says; only
    the files that differ from that."""
    template = (ROOT / "buf.gen.yaml").read_text(encoding="utf-8")
    previous = GO_PREFIX_PATTERN.search(template)
    if previous is None:
        sys.exit("buf.gen.yaml has no go_package_prefix value ending in /gen")
    old, new = previous.group(2), go_module()
    if old == new:
        return {}
    paths = []
    for follower in GO_FOLLOWERS:
        path = ROOT / follower
        paths += sorted(path.rglob("*")) if path.is_dir() else [path]
    changed = {}
    for path in paths:
        if path.suffix not in GO_FOLLOWER_SUFFIXES or "gen" in path.relative_to(ROOT).parts:
            continue
        text = path.read_text(encoding="utf-8")
        if old in text:
            changed[path] = text.replace(old, new)
    return changed


def _tree(base: Path) -> dict[str, str]:
    return {
        str(path.relative_to(base)): path.read_text(encoding="utf-8")
        for output in BUF_OUTPUTS
        for path in sorted((base / output).rglob("*"))
        if path.is_file()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed code is stale")
    args = parser.parse_args()
    moved = go_path_followers()
    if moved and not args.check:
        for path, text in moved.items():
            path.write_text(text, encoding="utf-8")
        print(f"the Go module is now {go_module()}: rewrote {len(moved)} files that named it")
    with tempfile.TemporaryDirectory() as python, tempfile.TemporaryDirectory() as other:
        files = generate(Path(python))
        others = generate_buf(Path(other))
        descriptor_set = (Path(python) / DESCRIPTOR_SET).read_bytes()
    surface = surface_text(files)
    if args.check:
        stale = stale_files(files, CLIENT_DIR)
        if not SURFACE.exists() or SURFACE.read_text(encoding="utf-8") != surface:
            stale.append(str(SURFACE.relative_to(ROOT)))
        committed_set = CLIENT_DIR / DESCRIPTOR_SET
        if not committed_set.exists() or committed_set.read_bytes() != descriptor_set:
            stale.append(DESCRIPTOR_SET)
        committed = _tree(ROOT)
        stale += sorted(
            name
            for name in others.keys() | committed.keys()
            if others.get(name) != committed.get(name)
        )
        stale += sorted(str(path.relative_to(ROOT)) for path in moved)
        if stale:
            print("generated clients are stale; run `make protos`:", ", ".join(stale))
            return 1
        print(f"generated clients are up to date ({len(files) + len(others) + 1} files)")
        return 0
    for package in PACKAGES:
        shutil.rmtree(CLIENT_DIR / package, ignore_errors=True)
        (CLIENT_DIR / package).mkdir(parents=True)
    for name, text in files.items():
        (CLIENT_DIR / name).write_text(text, encoding="utf-8")
    (CLIENT_DIR / DESCRIPTOR_SET).write_bytes(descriptor_set)
    SURFACE.write_text(surface, encoding="utf-8")
    for output in BUF_OUTPUTS:
        shutil.rmtree(ROOT / output, ignore_errors=True)
    for name, text in others.items():
        target = ROOT / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    print(
        f"wrote {len(files)} Python files, {DESCRIPTOR_SET}, {len(others)} Go and TypeScript files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The one version of memoryd (the VERSION file), written into every manifest, or checked.

    .venv/bin/python scripts/set_version.py 0.2.0   # set VERSION and every manifest
    .venv/bin/python scripts/set_version.py --check # exit 1 naming each one that disagrees

The server, the Python client (and the server's exact pin of it), the TypeScript package and
its lockfile, `memoryd.__version__` and the CHANGELOG's newest heading carry the same version.
The Go module is versioned by its git tag (`clients/go/vX.Y.Z`), cut from the same release.
tests/server/test_release.py runs the check in `make test`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$")


def _pattern(path: str, pattern: str) -> tuple[str, re.Pattern[str]]:
    return path, re.compile(pattern, re.MULTILINE)


# Each place: the file (from the root), and a pattern whose group 1 is the version it holds.
PLACES: dict[str, tuple[str, re.Pattern[str]]] = {
    "pyproject.toml version": _pattern("pyproject.toml", r'^version = "([^"]+)"'),
    "pyproject.toml memoryd-client pin": _pattern("pyproject.toml", r'"memoryd-client==([^"]+)"'),
    "clients/python/pyproject.toml version": _pattern(
        "clients/python/pyproject.toml", r'^version = "([^"]+)"'
    ),
    "memoryd.__version__": _pattern("server/memoryd/__init__.py", r'^__version__ = "([^"]+)"'),
    "CHANGELOG.md newest heading": _pattern(
        "CHANGELOG.md", r"^## (?:Unreleased \()?(\d+\.\d+\.\d+[^)\s]*)\)?"
    ),
}


PACKAGE = "clients/typescript/package.json"
LOCK = "clients/typescript/package-lock.json"
FILES = (*(path for path, _ in PLACES.values()), PACKAGE, LOCK)


def found_versions(root: Path = ROOT) -> dict[str, str | None]:
    """What each place says its version is (None: the pattern is not there)."""
    found: dict[str, str | None] = {}
    for name, (path, pattern) in PLACES.items():
        match = pattern.search((root / path).read_text(encoding="utf-8"))
        found[name] = match.group(1) if match else None
    package = json.loads((root / PACKAGE).read_text(encoding="utf-8"))
    found["clients/typescript/package.json version"] = package.get("version")
    lock = json.loads((root / LOCK).read_text(encoding="utf-8"))
    found["clients/typescript/package-lock.json version"] = lock.get("version")
    found["clients/typescript/package-lock.json root package"] = (
        lock.get("packages", {}).get("", {}).get("version")
    )
    return found


def disagreements(root: Path = ROOT) -> list[str]:
    """The places whose version is not the VERSION file's."""
    version = (root / "VERSION").read_text(encoding="utf-8").strip()
    return [
        f"{name} is {value!r}, VERSION is {version!r}"
        for name, value in found_versions(root).items()
        if value != version
    ]


def write(version: str, root: Path = ROOT) -> None:
    """Set `version` in VERSION and every place (the CHANGELOG's newest heading included)."""
    (root / "VERSION").write_text(version + "\n", encoding="utf-8")
    for path, pattern in PLACES.values():
        text = (root / path).read_text(encoding="utf-8")
        match = pattern.search(text)
        if match is None:
            sys.exit(f"{path} has no version to set ({pattern.pattern})")
        text = text[: match.start(1)] + version + text[match.end(1) :]
        (root / path).write_text(text, encoding="utf-8")
    package_path = root / PACKAGE
    package = json.loads(package_path.read_text(encoding="utf-8"))
    package["version"] = version
    package_path.write_text(json.dumps(package, indent=2) + "\n", encoding="utf-8")
    lock_path = root / LOCK
    lock = json.loads(lock_path.read_text(encoding="utf-8"))
    lock["version"] = version
    lock["packages"][""]["version"] = version
    lock_path.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Set the version everywhere, or check that every place agrees with VERSION."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("version", nargs="?", help="the new version (X.Y.Z)")
    parser.add_argument("--check", action="store_true", help="fail if a place disagrees")
    args = parser.parse_args(argv)
    if args.check:
        problems = disagreements()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    if not args.version or not SEMVER.match(args.version):
        parser.error("give the new version as X.Y.Z, or --check")
    write(args.version)
    print(f"version {args.version}: VERSION and {len(found_versions())} places")
    return 0


if __name__ == "__main__":
    sys.exit(main())

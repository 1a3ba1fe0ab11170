"""Release habits kept by tests: one version (the VERSION file) in every manifest, the client
pin and the CHANGELOG, and a check that can tell when one disagrees."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from scripts import set_version
from tests.conftest import ROOT


def test_every_manifest_carries_the_one_version() -> None:
    assert set_version.disagreements() == [], "run .venv/bin/python scripts/set_version.py X.Y.Z"


def test_a_manifest_that_disagrees_is_found_and_set_version_mends_it(tmp_path: Path) -> None:
    for relative in (*set_version.FILES, "VERSION"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    client = tmp_path / "clients/python/pyproject.toml"
    current = (ROOT / "VERSION").read_text(encoding="utf-8").strip()
    client.write_text(client.read_text(encoding="utf-8").replace(current, "7.7.7", 1))
    assert set_version.disagreements(tmp_path) == [
        f"clients/python/pyproject.toml version is '7.7.7', VERSION is {current!r}"
    ]
    set_version.write("0.9.0", tmp_path)
    assert set_version.disagreements(tmp_path) == []
    assert set(set_version.found_versions(tmp_path).values()) == {"0.9.0"}
    assert "## Unreleased (0.9.0)" in (tmp_path / "CHANGELOG.md").read_text(encoding="utf-8")


def test_every_server_package_is_in_the_distribution() -> None:
    """setuptools installs only the packages pyproject.toml lists: a new folder of the server
    left out would be missing from the wheel (tests/server/test_dist.py finds it too, in
    minutes)."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    server = ROOT / "server" / "memoryd"
    found = {
        ".".join(("memoryd", *folder.relative_to(server).parts))
        for folder in [server, *server.rglob("*")]
        if folder.is_dir() and (folder / "__init__.py").exists()
    }
    assert found <= listed, sorted(found - listed)

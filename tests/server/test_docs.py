"""The documentation stays true: generated pages are current, links resolve, and the README is
a front page (the walkthrough's own test replays docs/walkthrough.md)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from scripts import gen_docs
from tests.conftest import ROOT

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PAGES = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
]


def test_every_generated_part_is_current() -> None:
    assert gen_docs.stale_pages(gen_docs.PARTS, write=False) == [], (
        "run .venv/bin/python scripts/gen_docs.py"
    )


def test_a_stale_part_is_found_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check must be able to fail: a page whose generated part was edited by hand.
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "configuration.md", tmp_path / "docs" / "configuration.md")
    page = tmp_path / "docs" / "configuration.md"
    page.write_text(
        page.read_text(encoding="utf-8").replace("| `listen` |", "| `listen_here` |"),
        encoding="utf-8",
    )
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    parts = [part for part in gen_docs.PARTS if part[0] == "docs/configuration.md"]
    assert gen_docs.stale_pages(parts, write=True) == ["docs/configuration.md"]
    assert gen_docs.stale_pages(parts, write=False) == []
    assert page.read_text(encoding="utf-8") == (ROOT / "docs" / "configuration.md").read_text(
        encoding="utf-8"
    )


def test_every_setting_is_documented() -> None:
    from memoryd.config import SECTIONS  # noqa: PLC0415

    reference = gen_docs.settings_reference()
    for name, section in SECTIONS.items():
        assert f"### [memoryd.{name}]" in reference
        for field in section.fields():
            assert f"`MEMORYD_{name.upper()}_{field.name.upper()}`" in reference


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    targets = [target for target in LINK.findall(text) if "://" not in target]
    missing = [target for target in targets if not (page.parent / target).exists()]
    assert missing == []


def test_every_error_reason_is_documented() -> None:
    from memoryd.errors import Reason  # noqa: PLC0415

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = api.split("## Errors a program can read", 1)[1].split("\n## ", 1)[0]
    assert [reason for reason in Reason if f"`{reason}`" not in section] == []


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"the README does not link docs/{page.name}"

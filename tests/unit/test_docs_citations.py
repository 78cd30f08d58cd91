"""The rule pages and the README cite nothing outside the repository (issue #12 item 8)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs" / "rules").glob("*.md")), ROOT / "README.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_citation_of_a_path_outside_the_repository(page: Path) -> None:
    text = page.read_text()
    outside = re.findall(r"(?<![\w.])/(?:work|home|tmp|root)/\S+|\bshared/rules/\S+", text)
    assert outside == [], f"{page.relative_to(ROOT)} cites {outside}"


@pytest.mark.parametrize("page", PAGES[:-1], ids=lambda page: page.name)
def test_the_sections_a_rule_page_names_as_restated_exist(page: Path) -> None:
    text = page.read_text()
    intro = text.split("\n## ", 1)[0]
    headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
    named = re.findall(r'\("([^"]+)"(?:, "[^"]+")*\)|"([^"]+)"', intro)
    cited = {n for pair in named for n in pair if n and not n.startswith("(")} - {"Decisions"}
    for name in cited:
        assert any(heading.startswith(name) for heading in headings), (page.name, name)

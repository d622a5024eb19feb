"""Every relative link in README.md, CHANGELOG.md and docs/ points at a file of the repository, and
every #anchor at a heading of that file (GitHub's slug rule), so moving a section breaks a test, not a
reader's link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [m[1] for m in LINK.finditer(text) if not re.match(r"[a-z]+:", m[1])]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path):
    broken = []
    for target in links(doc):
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(target)
        elif anchor and path.is_file() and anchor not in anchors(path):
            broken.append(target)
    assert broken == [], f"{doc.relative_to(ROOT)}: {broken}"


def test_the_slug_rule_matches_githubs_on_this_repositorys_headings():
    assert slug("Circuit breaker (`orchestrator/breaker.py`, `orchestrator/circuit_store.py`)") == \
        "circuit-breaker-orchestratorbreakerpy-orchestratorcircuit_storepy"
    assert slug("A person's reply") == "a-persons-reply"

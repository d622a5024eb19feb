"""README.md stays a front door: short, the two commands first, and a link to every document."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_readme_commands import commands_of, fenced_blocks

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 200


def test_the_readme_is_at_most_200_lines():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines: move the detail into docs/ and link it"


def test_its_first_block_is_the_main_job_then_the_whole_suite():
    language, lines = fenced_blocks(README.read_text())[0]
    assert language == "bash"
    assert [c.split("#")[0].strip() for c in commands_of(lines)] == ["./scripts/prova.sh", "./scripts/test.sh"]
    first_block_line = README.read_text().splitlines().index("```bash")
    assert first_block_line <= 3, "the two commands come first, under the title"


def test_every_document_in_docs_is_linked_from_the_readme():
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README.read_text()))
    docs = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert docs - linked == set(), f"documents no reader can find from the front door: {sorted(docs - linked)}"
    assert "docs/decisions/" in linked

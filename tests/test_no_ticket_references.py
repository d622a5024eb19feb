"""Code, comments, docs and tests say the rule, not the ticket: no "issue N", "issue #N" or
"phase N" in a shipped file, a script, a test, README.md, CHANGELOG.md or docs/. Why something is
as it is belongs in docs/decisions/ (one record per decision) and CHANGELOG.md, written as what it
means, so a reader needs no tracker to understand the code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKET = re.compile(r"\bissues? ?#?\d+|\bphase \d+\b", re.I)
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".cfg", ".ini", ".txt", ".sql", ".jsonl", ".json", ".yml", ".yaml"}
# Open reproductions are raw attack notes kept out of the suite until fixed (tests/repro/README.md).
EXCLUDED_DIRS = ("tests/repro/",)
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()


def repository_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [name for name in listed if name and (ROOT / name).is_file()]


def scanned(name: str) -> bool:
    path = ROOT / name
    if name == THIS_FILE or name.startswith(EXCLUDED_DIRS) or name.startswith(("docs/results/",)):
        return False
    if path.suffix in TEXT_SUFFIXES:
        return True
    # Extensionless programs and configuration (scripts/aprovar, .ci/run, Makefile, .importlinter).
    return path.suffix == "" and path.read_bytes()[:4096].isascii()


def references(text: str) -> list[str]:
    return [m[0] for m in TICKET.finditer(text)]


def test_no_file_names_a_ticket():
    found = []
    for name in filter(scanned, repository_files()):
        for n, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1):
            if references(line):
                found.append(f"{name}:{n}: {line.strip()[:120]}")
    assert found == [], "say the rule, not the ticket (history: docs/decisions/, CHANGELOG.md):\n" + "\n".join(found)


def test_the_pattern_catches_the_forms_used_before_and_spares_ordinary_words():
    for text in ("(issue 14)", "issue #8", "Issue 14's goals", "issues 8 and 9", "phase 2 changed", "ISSUE 10"):
        assert references(text), text
    for text in ("an issue with the gateway", "phase1 = _cdk(...)", "two-phase commit", "tissue 4", "reissue 3"):
        assert not references(text), text


def test_the_scan_covers_code_scripts_tests_and_docs():
    names = set(filter(scanned, repository_files()))
    for expected in ("README.md", "CHANGELOG.md", "docs/architecture.md", "orchestrator/controls.py",
                     "functions/cadencia_shared/catalog.py", "infra/app.py", "scripts/prova.sh", "scripts/aprovar",
                     "tests/test_approvals.py", "Makefile"):
        assert expected in names, expected
    assert not any(name.startswith("tests/repro/") for name in names)

"""The lint and type checks stay what docs/architecture.md ("Lint and types") says: run by the test
command before pytest, strict on the shipped code, pinned, with every suppression explained."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("orchestrator", "functions", "infra")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def test_the_test_command_runs_ruff_then_mypy_after_the_import_contracts_and_before_pytest() -> None:
    lines = [line.strip() for line in (ROOT / "scripts" / "test.sh").read_text().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    order = [next(i for i, line in enumerate(lines) if line.startswith(command)) for command in (
        'PYTHONPATH="$PWD:$PWD/functions" .venv/bin/lint-imports', ".venv/bin/ruff check",
        ".venv/bin/mypy", ".venv/bin/python -m pytest")]
    assert order == sorted(order)
    for command in (".venv/bin/ruff check", ".venv/bin/mypy"):  # a finding fails the run, saying which
        at = next(i for i, line in enumerate(lines) if line.startswith(command))
        failure = " ".join(lines[at:at + 2])
        assert "|| {" in failure and "exit 1" in failure and command.split("/")[-1].split()[0] in failure
    ruff = next(line for line in lines if line.startswith(".venv/bin/ruff check"))
    assert all(part in ruff.split() for part in (*SHIPPED, "scripts", "tests"))


def test_mypy_is_strict_on_the_shipped_code_with_no_module_relaxed() -> None:
    mypy = PYPROJECT["tool"]["mypy"]
    assert mypy["strict"] is True
    assert set(mypy["files"]) == set(SHIPPED)
    # No per-module escape hatch: a module that does not pass is fixed, not listed.
    assert "overrides" not in mypy and "ignore_missing_imports" not in mypy and "ignore_errors" not in mypy


def test_ruff_selects_the_families_a_reviewer_expects() -> None:
    lint = PYPROJECT["tool"]["ruff"]["lint"]
    assert {"E", "F", "W", "I", "B", "UP", "SIM", "RUF"} <= set(lint["select"])
    assert set(lint.get("ignore", [])) <= {"RUF005"}  # it says why in pyproject.toml
    assert "pycodestyle" not in lint  # lines of at most line-length (120), no wider E501 limit


def test_the_checkers_and_their_stubs_are_pinned_in_the_dev_requirements_and_the_lock() -> None:
    dev, lock = _pins(ROOT / "requirements" / "dev.txt"), _pins(ROOT / "requirements.lock")
    for name in ("mypy", "ruff", "boto3-stubs", "botocore-stubs", "types-jsonschema"):
        assert dev[name] == lock[name], name
    # scripts/setup.sh installs the lock with --no-deps: mypy's own dependencies are pinned too.
    for name in ("mypy-extensions", "typing-extensions", "pathspec", "librt", "ast-serialize", "types-s3transfer"):
        assert name in lock, name


def test_every_type_ignore_in_shipped_code_names_its_code_and_says_why() -> None:
    unexplained = []
    for package in SHIPPED:
        for path in (ROOT / package).rglob("*.py"):
            lines = path.read_text().splitlines()
            for number, line in enumerate(lines, 1):
                if "type: ignore" not in line:
                    continue
                coded = re.search(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]", line)
                after = line.split("type: ignore", 1)[1]
                reason = "#" in after or (number > 1 and lines[number - 2].strip().startswith("#"))
                if not (coded and reason):
                    unexplained.append(f"{path.relative_to(ROOT)}:{number}")
    assert unexplained == []

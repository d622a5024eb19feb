"""Size and complexity budget of the code that ships or deploys: no module in
functions/, orchestrator/ or infra/ over 400 lines, no function over cyclomatic complexity 15
(radon's count, the figure `radon cc -s` prints).

The allow-lists are empty: every module and function is within budget. An entry must say
why and what removes it, and an entry that is no longer needed fails the test, so the lists
can only shrink.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Class

ROOT = Path(__file__).resolve().parents[1]
BUDGETED = ("functions", "orchestrator", "infra")
MAX_LINES = 400
MAX_COMPLEXITY = 15

# path -> why it is over the line budget today (and which branch removes it)
LINES_ALLOWED: dict[str, str] = {}
# "path::qualified name" -> why it is over the complexity budget today (and which branch removes it)
COMPLEXITY_ALLOWED: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for top in BUDGETED for p in (ROOT / top).rglob("*.py") if ".venv" not in p.parts)


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _over_complexity(path: Path, root: Path = ROOT) -> dict[str, int]:
    """Functions and methods over the budget (radon lists a class's methods as blocks of their
    own; a class's figure is their aggregate, not a function's, so classes are skipped)."""
    relative = path.relative_to(root).as_posix()
    return {f"{relative}::{block.fullname}": block.complexity
            for block in cc_visit(path.read_text(encoding="utf-8"))
            if not isinstance(block, Class) and block.complexity > MAX_COMPLEXITY}


def test_every_budgeted_module_is_counted():
    modules = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {"orchestrator/loop.py", "functions/emitir_reembolso/logic.py", "infra/app.py"} <= modules
    assert all((ROOT / allowed).is_file() for allowed in LINES_ALLOWED), "an allow-listed module is gone: drop it"


def test_no_module_over_400_lines():
    over = {p.relative_to(ROOT).as_posix(): n for p in _modules() if (n := _line_count(p)) > MAX_LINES}
    assert {k: v for k, v in over.items() if k not in LINES_ALLOWED} == {}
    assert sorted(set(LINES_ALLOWED) - set(over)) == [], "within budget now: remove from LINES_ALLOWED"


def test_no_function_over_complexity_15():
    over: dict[str, int] = {}
    for path in _modules():
        over.update(_over_complexity(path))
    assert {k: v for k, v in over.items() if k not in COMPLEXITY_ALLOWED} == {}
    assert sorted(set(COMPLEXITY_ALLOWED) - set(over)) == [], "within budget now: remove from COMPLEXITY_ALLOWED"


@pytest.mark.parametrize("source, expected", [
    ("def f(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(15)) + "    return -1\n", 16),
    ("class C:\n    def m(self, x):\n" + "".join(f"        if x == {i}:\n            return {i}\n"
                                            for i in range(16)) + "        return -1\n", 17),
])
def test_the_counter_sees_functions_and_methods(tmp_path, source, expected):
    """The check can fail: a function and a method over the budget are both reported."""
    module = tmp_path / "wide.py"
    module.write_text(source)
    assert list(_over_complexity(module, tmp_path).values()) == [expected]

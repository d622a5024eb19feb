"""Issue 9's limits for infra/: no module over 400 lines, no function over
cyclomatic complexity 15 (radon, pinned in requirements/dev.txt)."""

from __future__ import annotations

from pathlib import Path

import pytest
from radon.complexity import cc_visit

INFRA = Path(__file__).resolve().parents[2] / "infra"
MODULES = sorted(INFRA.rglob("*.py"))

pytestmark = pytest.mark.infra


def test_infra_has_modules_to_check():
    assert len(MODULES) > 15


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(INFRA)))
def test_module_size_and_complexity(module):
    source = module.read_text()
    assert source.count("\n") <= 400, f"{module.name}: {source.count(chr(10))} lines"
    blocks = cc_visit(source)
    functions = [b for b in blocks if not hasattr(b, "methods")] + [m for b in blocks for m in getattr(b, "methods", [])]
    assert functions or "def " not in source
    too_complex = [(f.name, f.complexity) for f in functions if f.complexity > 15]
    assert not too_complex, too_complex

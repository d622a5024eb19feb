"""``scripts/local-stack reconcile`` and ``audit`` share the reconciler's start-up
(the running stack, its environment, the metrics sink): with the stack down both
say so and exit 3, touching nothing. (Their passes on a running stack:
tests/test_conciliar_reembolsos.py and tests/test_books_audit.py.)"""
from __future__ import annotations

import pytest

from scripts.local_stack.__main__ import main


@pytest.mark.parametrize("command", ["reconcile", "audit"])
def test_a_reconciler_command_on_a_stopped_stack_says_so_and_exits_3(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CADENCIA_LOCAL_STACK_DIR", str(tmp_path))
    assert main([command]) == 3
    assert "local stack: down (run: scripts/local-stack up)" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []

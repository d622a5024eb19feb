"""prova's approvals section, on the local stack: every row's observed figure equals
the expected one (0 debits with no approver, exactly 1 with one approval, replayed
and altered approvals refused)."""

from __future__ import annotations

from scripts import prova_aprovacoes
from scripts.harness.local_run import seed_erp
from scripts.harness.scripted_model import ScriptedModelServer


def test_the_approvals_section_shows_every_expected_figure(local_stack, gateway):
    seed_erp(local_stack, [prova_aprovacoes._scenario("seed", o, v) for o, v in prova_aprovacoes.ORDERS])
    with ScriptedModelServer() as server:
        rows = prova_aprovacoes.run(prova_aprovacoes.Section(local_stack, server))
    assert len(rows) == 12
    assert [(name, observed) for name, expected, observed in rows if expected != observed] == []
    totals = dict((name, observed) for name, _, observed in rows)
    assert totals["sem aprovador: débitos reais no gateway"] == 0
    assert totals["total de débitos reais (todas as conversas desta seção)"] == 1

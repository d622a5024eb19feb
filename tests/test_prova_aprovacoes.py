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


def test_the_approvals_section_writes_its_audit_on_the_chains_the_verifier_accepts(local_stack, gateway):
    """The section is a writer like any other: the refusals, decisions and resumes it
    provokes go on each conversation's hash chain — none as an ``auditoria#`` item
    outside it, every chain intact and anchored."""
    from cadencia_shared.audit_anchors import LedgerAnchors
    from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
    from scripts.local_stack.aws import session_client

    seed_erp(local_stack, [prova_aprovacoes._scenario("seed", o, v) for o, v in prova_aprovacoes.ORDERS])
    with ScriptedModelServer() as server:
        section = prova_aprovacoes.Section(local_stack, server)
        scenario = prova_aprovacoes._scenario("aprov-cadeia", *prova_aprovacoes.ORDERS[0])
        assert section.converse(scenario, approvers="") == "aguardando_humano"
    client = session_client("dynamodb", local_stack.aws_endpoint)
    assert LedgerAnchors(client, local_stack.ledger_table).unchained_records(scenario.conversaId) == {}
    chain = AuditChain(AUDIT_TABLE, client, anchor_table=local_stack.ledger_table)
    events = [record["evento"] for record in chain.records(scenario.conversaId)]
    assert "APROVACAO_SEM_APROVADOR" in events
    report = chain.check(scenario.conversaId)
    assert (report.broken, report.unanchored) == (None, 0)
    assert section.audits([scenario], "APROVACAO_SEM_APROVADOR") == 1

"""The roles' code run against a ledger client that enforces each role's row of
``infra/ledger_kinds.py`` (what IAM enforces in AWS and moto does not): every call a
flow makes must be one the row grants — kinds AND actions."""

from __future__ import annotations

from decimal import Decimal

from cadencia_shared import approval_policy, seal_edge
from cadencia_shared.identity import APPROVERS, SUPERVISORS, Person
from cadencia_shared.ledger import Ledger, SwitchState
from cadencia_shared.seal import Verifier
from cadencia_shared.seal_approvals import ledger_approvals
from infra.contract import Ids
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.ledger_rows import RowEnforcingClient
from .test_approval_lifecycle import _approval, _ask, _conv, _decide, _invoker

ANA = Person(subject="ana.operadora", name="Ana", groups=frozenset({APPROVERS, SUPERVISORS}))


def _as_role(mocked_aws, role: str) -> tuple[Ledger, RowEnforcingClient]:
    base = mocked_aws["ledger"]
    client = RowEnforcingClient(mocked_aws["dynamodb"], base.table_name, role)
    return Ledger(base.table_name, client), client


def test_the_orchestrator_asks_and_the_decision_role_approves_a_lower_amount_within_their_rows(
        mocked_aws, gateway, tools):
    orchestrator, as_orchestrator = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    conv = _conv("linhas")
    first, _ = _ask(orchestrator, _invoker(tools), conv)
    assert first.motivo == "aguardando_aprovacao" and as_orchestrator.violations == []

    decision, as_decision = _as_role(mocked_aws, Ids.DECISION_ROLE)
    decided = approval_policy.decide(decision, _approval(mocked_aws["ledger"], conv), person=ANA, approve=True,
                                     justification="conferido", approved_amount=Decimal("120.00"),
                                     settings=approval_policy.PolicySettings())
    assert decided.record.arguments["valor"] == 120.0 or str(decided.record.arguments["valor"]) == "120.00"
    assert as_decision.violations == []


def test_the_decision_role_sets_and_reads_a_switch_within_its_row(mocked_aws):
    decision, as_decision = _as_role(mocked_aws, Ids.DECISION_ROLE)
    decision.set_switch("emitir_reembolso", SwitchState.STOPPED, subject="s", name="Supervisora", reason="teste")
    assert not decision.tool_switch("emitir_reembolso").running and as_decision.violations == []


def test_the_enforcing_client_notices_a_call_the_row_does_not_grant(mocked_aws):
    orchestrator, as_orchestrator = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    orchestrator.set_switch("emitir_reembolso", SwitchState.STOPPED, subject="s", name="n", reason="teste")
    assert as_orchestrator.violations == [("dynamodb:PutItem", "interruptor#", "interruptor#emitir_reembolso")]


def test_a_sealed_refund_above_the_limit_runs_within_the_rows_of_the_orchestrator_and_the_refund_tool(
        mocked_aws, gateway, tools, monkeypatch):
    """The orchestrator opens and closes the turn's session (sessao#), the refund's edge reads it,
    reads the approval the envelope names and the person's decision on it (decisao#), and uses up
    the envelope (jti#): each within its row."""
    refund_table, as_refund = _as_role(mocked_aws, Ids.role("emitir_reembolso"))
    edge = Verifier(refund_table.table, ledger_approvals(refund_table))
    monkeypatch.setattr(seal_edge, "verify", lambda tool, event, _approvals: edge.verify(tool, event))
    orchestrator, as_orchestrator = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    conv = _conv("selada")
    first, orch = _ask(orchestrator, _invoker(tools), conv)
    assert first.motivo == "aguardando_aprovacao"
    _decide(mocked_aws["ledger"], _approval(mocked_aws["ledger"], conv))
    resumed = Resumer.of(orch).resume(_approval(mocked_aws["ledger"], conv), Deadline.after(60))
    assert resumed.reason == "aprovada_executada" and len(gateway.debits_for(conv)) == 1
    assert as_orchestrator.violations == [] and as_refund.violations == []
    assert {"sessao#", "jti#", "aprovacao#", "decisao#"} <= {kind for _, kind, _ in as_refund.calls}
    assert ("dynamodb:PutItem", "sessao#") in {(a, k) for a, k, _ in as_orchestrator.calls}

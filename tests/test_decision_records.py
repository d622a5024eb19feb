"""An approval is approved only by a record the orchestrator cannot write: ``decisao#{id}``
(``cadencia_shared.approval_decisions``), which only the decision role writes; the request's
``aprovada`` (``aprovacao#``, which the orchestrators write) authorises nothing by itself
(``cadencia_shared.approval_use``: the gate, the resume and the SEAL check all ask it).

The flows run against clients enforcing each role's row of ``infra/ledger_kinds.py`` and
refusing what it does not grant (AccessDenied, as IAM does in AWS); every debit is counted on
the fake gateway. Threshold R$ 100, so R$ 150 on order 4821 needs a person."""

from __future__ import annotations

from decimal import Decimal

import pytest
from botocore.exceptions import ClientError

from cadencia_shared import approval_decisions, approval_policy
from cadencia_shared.approval_arguments import canonical_arguments
from cadencia_shared.approval_use import Usability, usability
from cadencia_shared.approval_use import binding_of as approval_use_binding
from cadencia_shared.approvals import ApprovalStatus, ApprovalStore, DecisionRefused
from cadencia_shared.identity import APPROVERS, Person
from cadencia_shared.ledger import APPROVAL_APPROVED_MARK, Ledger, approval_pk, decision_pk
from cadencia_shared.ledger.table import serialize
from cadencia_shared.seal import SealCode
from cadencia_shared.seal_approvals import ledger_approvals
from infra.contract import Ids
from infra.ledger_kinds import LEDGER_ACCESS
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.ledger_rows import RowEnforcingClient
from .test_approval_lifecycle import _approval, _ask, _conv, _invoker

ANA = Person(subject="ana.operadora", name="Ana", groups=frozenset({APPROVERS}))
BRUNO = Person(subject="bruno.operador", name="Bruno", groups=frozenset({APPROVERS}))
WRITES = {"dynamodb:PutItem", "dynamodb:UpdateItem"}


def _as_role(mocked_aws, role: str) -> tuple[Ledger, RowEnforcingClient]:
    base = mocked_aws["ledger"]
    client = RowEnforcingClient(mocked_aws["dynamodb"], base.table_name, role, deny=True)
    return Ledger(base.table_name, client), client


def _decide(ledger: Ledger, approval: str, person: Person, *, approve: bool = True,
            two_above: str = "2000") -> approval_policy.Decided:
    return approval_policy.decide(ledger, approval, person=person, approve=approve, justification="conferido",
                                  approved_amount=None,
                                  settings=approval_policy.PolicySettings(APROVACAO_DUPLA_ACIMA_REAIS=Decimal(two_above)))


def _forge_approved(orchestrator: Ledger, approval: str) -> None:
    """What an orchestrator (or anyone holding its role) can write on its own request."""
    orchestrator.client.update_item(
        TableName=orchestrator.table_name, Key=orchestrator.table.key(approval_pk(approval)),
        UpdateExpression="SET #st = :st, decididoPor = :por, decididoEm = :em, pendencia = :marca",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues=serialize({":st": "aprovada", ":por": ANA.subject, ":em": "2026-12-05T00:00:00Z",
                                             ":marca": APPROVAL_APPROVED_MARK}))


def _seal_check(ledger: Ledger, approval: str) -> SealCode | None:
    record = ApprovalStore(ledger).get(approval)
    assert record is not None
    return ledger_approvals(ledger)(approval, record.conversation_id, record.tool, dict(record.arguments))


def test_only_the_decision_role_has_any_write_on_decisions():
    writers = {role for role, row in LEDGER_ACCESS.items() if WRITES & set(row.get("decisao#", ()))}
    assert writers == {Ids.DECISION_ROLE}
    assert LEDGER_ACCESS[Ids.DECISION_ROLE]["decisao#"] == ("dynamodb:GetItem", "dynamodb:PutItem")
    for role in (Ids.ORCHESTRATOR_ROLE, Ids.WHATSAPP_CONSUMER_ROLE, Ids.role("emitir_reembolso")):
        assert LEDGER_ACCESS[role]["decisao#"] == ("dynamodb:GetItem",)


def test_the_orchestrator_cannot_write_a_decision(mocked_aws):
    orchestrator, as_orchestrator = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    key = orchestrator.table.key(decision_pk("x" * 32))
    with pytest.raises(ClientError, match="AccessDenied"):
        orchestrator.client.put_item(TableName=orchestrator.table_name,
                                     Item={**key, "decisao": {"S": "aprovada"}})
    with pytest.raises(ClientError, match="AccessDenied"):
        orchestrator.client.update_item(TableName=orchestrator.table_name, Key=key,
                                        UpdateExpression="SET decisao = :d",
                                        ExpressionAttributeValues={":d": {"S": "aprovada"}})
    assert [v[:2] for v in as_orchestrator.violations] == [("dynamodb:PutItem", "decisao#"),
                                                          ("dynamodb:UpdateItem", "decisao#")]
    orchestrator.client.get_item(TableName=orchestrator.table_name, Key=key)  # reading is its row's
    assert mocked_aws["ledger"].table.get(decision_pk("x" * 32)) is None


def test_a_request_marked_approved_by_hand_runs_nothing(mocked_aws, gateway, tools):
    orchestrator, as_orchestrator = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    conv, invoker = _conv("forjada"), _invoker(tools)
    _, orch = _ask(orchestrator, invoker, conv)
    approval = _approval(mocked_aws["ledger"], conv)
    _forge_approved(orchestrator, approval)
    assert ApprovalStore(orchestrator).get(approval).status is ApprovalStatus.APPROVED
    assert usability(orchestrator, ApprovalStore(orchestrator).get(approval), conversation_id=conv,
                     tool="emitir_reembolso",
                     arguments_sha256=ApprovalStore(orchestrator).get(approval).arguments_sha256) \
        is Usability.NOT_USABLE
    assert _seal_check(orchestrator, approval) is SealCode.APPROVAL_NOT_USABLE

    resumed = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert resumed.reason == "aprovacao_inutilizavel" and resumed.status == "aguardando_humano"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []
    assert ApprovalStore(orchestrator).get(approval).status is ApprovalStatus.APPROVED  # never consumed
    assert as_orchestrator.violations == []


def test_a_decision_for_other_arguments_is_not_usable(mocked_aws, gateway, tools):
    orchestrator, _ = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    conv, invoker = _conv("outros-args"), _invoker(tools)
    _, orch = _ask(orchestrator, invoker, conv)
    approval = _approval(mocked_aws["ledger"], conv)
    record = ApprovalStore(orchestrator).get(approval)
    other = canonical_arguments({"pedidoId": "4821", "valor": 15.0})[1]
    # A decision record (as only the decision role could write) binding other arguments.
    decision, _ = _as_role(mocked_aws, Ids.DECISION_ROLE)
    approval_decisions.write(decision, approval_decisions.Binding(
        record.id, conv, record.tool, record.tool_version, other, record.expires_at_ms),
        decision=approval_decisions.APPROVED, approvers=(ANA.subject,), required=1)
    _forge_approved(orchestrator, approval)
    assert _seal_check(orchestrator, approval) is SealCode.APPROVAL_NOT_USABLE
    resumed = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert resumed.reason == "aprovacao_inutilizavel"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []


def test_the_normal_decision_debits_exactly_once(mocked_aws, gateway, tools):
    orchestrator, as_orchestrator = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    decision, as_decision = _as_role(mocked_aws, Ids.DECISION_ROLE)
    conv, invoker = _conv("normal"), _invoker(tools)
    _, orch = _ask(orchestrator, invoker, conv)
    approval = _approval(mocked_aws["ledger"], conv)
    assert _decide(decision, approval, ANA).outcome == "aprovada"
    stored = approval_decisions.read(orchestrator, approval)
    assert stored is not None and stored.approvers == (ANA.subject,) and stored.required == 1
    assert _seal_check(orchestrator, approval) is None
    first = Resumer.of(orch).resume(approval, Deadline.after(60))
    again = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert first.reason == "aprovada_executada" and again.reason == "nada_a_retomar"
    assert len(gateway.debits_for(conv)) == 1
    assert as_orchestrator.violations == [] and as_decision.violations == []


def test_two_people_are_needed_and_a_forged_first_approval_counts_for_nothing(mocked_aws, gateway, tools):
    orchestrator, _ = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    decision, as_decision = _as_role(mocked_aws, Ids.DECISION_ROLE)
    conv, invoker = _conv("duas"), _invoker(tools)
    _, orch = _ask(orchestrator, invoker, conv)
    approval = _approval(mocked_aws["ledger"], conv)
    # The orchestrator writes a "first approval" by someone on its own request: it decides nothing.
    orchestrator.client.update_item(
        TableName=orchestrator.table_name, Key=orchestrator.table.key(approval_pk(approval)),
        UpdateExpression="SET primeiraAprovacao = :p",
        ExpressionAttributeValues=serialize({":p": {"sub": "carla.forjada", "nome": "Carla", "em": "x"}}))
    assert _decide(decision, approval, ANA, two_above="100").outcome == approval_policy.AWAITING_SECOND
    assert _decide(decision, approval, ANA, two_above="100").outcome == approval_policy.AWAITING_SECOND
    assert approval_decisions.read(decision, approval) is None  # nothing authorises yet
    assert _decide(decision, approval, BRUNO, two_above="100").outcome == "aprovada"
    stored = approval_decisions.read(decision, approval)
    assert stored is not None and stored.approvers == (ANA.subject, BRUNO.subject) and stored.required == 2
    assert Resumer.of(orch).resume(approval, Deadline.after(60)).reason == "aprovada_executada"
    assert len(gateway.debits_for(conv)) == 1 and as_decision.violations == []


def test_a_denial_stands_even_when_the_request_is_reopened_by_hand(mocked_aws, gateway, tools):
    orchestrator, _ = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    decision, _ = _as_role(mocked_aws, Ids.DECISION_ROLE)
    conv, invoker = _conv("negada"), _invoker(tools)
    _ask(orchestrator, invoker, conv)
    approval = _approval(mocked_aws["ledger"], conv)
    assert _decide(decision, approval, ANA, approve=False).outcome == "negada"
    with pytest.raises(DecisionRefused, match="aprovador_ja_negou"):
        _decide(decision, approval, ANA)
    # The orchestrator puts its request back to pendente: the denial record still stands.
    orchestrator.client.update_item(
        TableName=orchestrator.table_name, Key=orchestrator.table.key(approval_pk(approval)),
        UpdateExpression="SET #st = :p", ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues=serialize({":p": "pendente"}))
    with pytest.raises(DecisionRefused, match="aprovador_ja_negou"):
        _decide(decision, approval, ANA)
    with pytest.raises(DecisionRefused, match="aprovacao_ja_decidida"):
        _decide(decision, approval, BRUNO)
    assert approval_decisions.read(decision, approval).decision == approval_decisions.DENIED
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []


def _approved_request(ledger: Ledger):
    store = ApprovalStore(ledger)
    record, _ = store.request(tool="emitir_reembolso", version="v1", arguments={"pedidoId": "4821", "valor": 150.0},
                              conversation_id=_conv("campos"), customer_id=1001, amount=Decimal("150"),
                              reason="acima_do_limite", validity_s=600)
    _forge_approved(ledger, record.id)
    return store.get(record.id)


# Each way a decision record may fail to be exactly this request's approval.
OFF = {
    "conversation": ({"conversation_id": "outra-conversa"}, {}),
    "tool": ({"tool": "atualizar_cadastro"}, {}),
    "version": ({"tool_version": "v2"}, {}),
    "digest": ({"arguments_sha256": "0" * 64}, {}),
    "expiry": ({"expires_at_ms": 10**15}, {}),
    "denied": ({}, {"decision": approval_decisions.DENIED}),
    "first only": ({}, {"decision": approval_decisions.FIRST}),
    "one person twice": ({}, {"approvers": (ANA.subject, ANA.subject), "required": 2}),
    "nobody required": ({}, {"approvers": (), "required": 0}),
}


@pytest.mark.parametrize("off", sorted(OFF))
def test_a_decision_record_off_by_one_field_authorises_nothing(mocked_aws, off):
    ledger = mocked_aws["ledger"]
    record = _approved_request(ledger)
    changed, written = OFF[off]
    binding = approval_use_binding(record)
    binding = type(binding)(**{**binding.__dict__, **changed})
    approval_decisions.write(ledger, binding, **{"decision": approval_decisions.APPROVED,
                                                 "approvers": (ANA.subject,), "required": 1, **written})
    assert usability(ledger, record, conversation_id=record.conversation_id, tool=record.tool,
                     arguments_sha256=record.arguments_sha256) is Usability.NOT_USABLE


def test_the_same_record_with_its_exact_decision_is_usable(mocked_aws):
    """The control for the test above: nothing changed, usable."""
    ledger = mocked_aws["ledger"]
    record = _approved_request(ledger)
    approval_decisions.write(ledger, approval_use_binding(record), decision=approval_decisions.APPROVED,
                             approvers=(ANA.subject,), required=1)
    assert usability(ledger, record, conversation_id=record.conversation_id, tool=record.tool,
                     arguments_sha256=record.arguments_sha256) is Usability.USABLE
    assert usability(ledger, record, conversation_id=record.conversation_id, tool=record.tool,
                     arguments_sha256="0" * 64) is Usability.NOT_BINDING


def test_the_refund_edge_reads_the_request_and_the_decision_within_its_row(mocked_aws, gateway, tools):
    """SEAL's approval check as the refund tool's role (IAM's row enforced): it GetItems the request
    AND the person's decision, nothing else; a request marked approved by hand is 2006 there too."""
    orchestrator, _ = _as_role(mocked_aws, Ids.ORCHESTRATOR_ROLE)
    decision, _ = _as_role(mocked_aws, Ids.DECISION_ROLE)
    refund, as_refund = _as_role(mocked_aws, Ids.role("emitir_reembolso"))
    conv = _conv("borda")
    _ask(orchestrator, _invoker(tools), conv)
    approval = _approval(mocked_aws["ledger"], conv)
    _forge_approved(orchestrator, approval)
    assert _seal_check(refund, approval) is SealCode.APPROVAL_NOT_USABLE
    assert ("dynamodb:GetItem", "decisao#") in {(a, k) for a, k, _ in as_refund.calls}
    # The real decision (the request is already aprovada by hand: its record is written, the request kept).
    approval_decisions.write(decision, approval_use_binding(ApprovalStore(decision).get(approval)),
                             decision=approval_decisions.APPROVED, approvers=(ANA.subject,), required=1)
    assert _seal_check(refund, approval) is None
    assert {(a, k) for a, k, _ in as_refund.calls} == {("dynamodb:GetItem", "aprovacao#"),
                                                      ("dynamodb:GetItem", "decisao#")}
    assert as_refund.violations == []

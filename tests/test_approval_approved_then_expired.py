"""An APPROVED request whose resume was lost (a busy or failed invocation) and whose
expiry then passed: an approval binds an expiry, so the call never runs after it; the
record is closed (``expirada``, its previous status ``aprovada`` audited) and the
customer is told the truth — a person approved it, it was not run in time, nothing
moved — never that it "expired without a decision". The expiry sweep finds such a
record (approved records stay in the sparse index until consumed or closed).
Injected clock; every debit counted on the gateway itself."""
from __future__ import annotations

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.ledger import ItemType
from cadencia_shared.models import ExpireRequest
from decidir_aprovacao.logic import handle as decision_entry
from orchestrator import texts
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.anthropic_fake import ScriptedModel
from .support.orchestrators import build
from .test_approval_lifecycle import (
    APPROVERS,
    POLICY,
    _approval,
    _ask,
    _audit,
    _clocked,
    _conv,
    _decide,
    _details,
    _invoker,
    _turn,
)


def _approved_expired() -> str:
    return texts.APPROVED_EXPIRED.format(order_id="4821")


def _expiries(ledger, conv: str) -> list[tuple[str, str]]:
    return [(_details(a)["aprovacaoId"], _details(a)["statusAnterior"]) for a in _audit(ledger, conv)
            if a["evento"] == "APROVACAO_EXPIRADA"]


def test_the_customer_is_told_an_approved_request_was_not_run_in_time(mocked_aws, gateway, tools):
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("aprovada-expira")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval, [])["ok"] is True  # approved; its resume is lost
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.APPROVED
    clock[0] += 601
    orch, _ = build(ScriptedModel(), ledger, invoker, **POLICY)  # no model call in this turn
    after = orch.handle(_turn(conv, "e agora?"), Deadline.after(60))
    assert "sem uma decisão" not in after.resposta
    assert after.resposta == _approved_expired()
    assert after.status == "ativa"
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.EXPIRED
    assert _expiries(ledger, conv) == [(approval, "aprovada")]
    assert gateway.debits_for(conv) == []
    # A resume arriving now (the lost one, retried) changes nothing and runs nothing.
    late = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert late.reason == "nada_a_retomar" and gateway.debits_for(conv) == []


def test_the_sweep_closes_an_approved_unconsumed_expired_record_and_tells_the_customer(mocked_aws, gateway, tools):
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("aprovada-varredura")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval, [])["ok"] is True  # the resume it triggers is lost
    clock[0] += 599
    resumed: list[str] = []
    sweep = decision_entry(ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS,
                           resume=resumed.append)
    assert sweep == {"ok": True, "expiradas": []}  # not expired yet: its own resume's retries own it
    clock[0] += 2
    sweep = decision_entry(ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS,
                           resume=resumed.append)
    assert sweep == {"ok": True, "expiradas": [approval]} and resumed == [approval]
    done = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert (done.reason, done.status, done.reply) == ("aprovada_expirada", "ativa", _approved_expired())
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.EXPIRED
    assert _expiries(ledger, conv) == [(approval, "aprovada")]
    assert gateway.debits_for(conv) == []
    # Closed: the next sweep no longer finds it.
    again = decision_entry(ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS,
                           resume=resumed.append)
    assert again == {"ok": True, "expiradas": []}


def test_a_consumed_approval_leaves_the_sweeps_index(mocked_aws, gateway, tools):
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("aprovada-consumida")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval)["ok"] is True
    assert approval in [r.id for r in ApprovalStore(ledger).approved()]
    assert Resumer.of(orch).resume(approval, Deadline.after(60)).reason == "aprovada_executada"
    assert approval not in [r.id for r in ApprovalStore(ledger).approved()]
    clock[0] += 601
    sweep = decision_entry(ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS,
                           resume=[].append)
    assert approval not in sweep["expiradas"]
    assert len(gateway.debits_for(conv)) == 1


def test_an_expiry_landing_during_the_resume_runs_nothing_and_reuses_no_id(mocked_aws, gateway, tools, monkeypatch):
    """The resume reads the approved record before its expiry; the expiry passes while the
    gate looks the request up (a slow resume). The gate's lookup finds the approved
    record itself (the attempt number it asked under): it is never replaced by a fresh
    request under the same id, and the expired approval is not consumed nor run."""
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("expira-na-retomada")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval)["ok"] is True
    clock[0] += 599
    request = ApprovalStore.request

    def slow_request(self, **kwargs):
        clock[0] += 2  # the expiry passes right as the gate looks the request up
        return request(self, **kwargs)

    monkeypatch.setattr(ApprovalStore, "request", slow_request)
    done = Resumer.of(orch).resume(approval, Deadline.after(60))
    monkeypatch.undo()
    assert gateway.debits_for(conv) == [] and invoker.calls["emitir_reembolso"] == 0
    assert (done.reason, done.status) == ("aprovada_nao_executada", "aguardando_humano")
    assert "Nenhum valor foi movimentado" in done.reply
    record = ApprovalStore(ledger).get(approval)
    assert record.status is ApprovalStatus.APPROVED and record.decided_by is not None  # never overwritten
    assert [i["aprovacaoId"] for i in ledger.history(conv, item_type=ItemType.APPROVAL)] == [approval]
    # The sweep later closes it; the conversation is with a person, so nobody is told twice.
    decision_entry(ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS, resume=[].append)
    assert Resumer.of(orch).resume(approval, Deadline.after(60)).reason == "nada_a_retomar"
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.EXPIRED

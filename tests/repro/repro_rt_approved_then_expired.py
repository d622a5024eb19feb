"""An APPROVED record whose resume has not run yet (busy/failed invocation) and whose
expiry then passes: the customer's next message closes it as `expirada` and tells the
customer it 'expired without a decision from our team' -- a person approved it."""
from __future__ import annotations

from cadencia_shared.approvals import ApprovalStore
from orchestrator.model import Deadline
from tests.support.anthropic_fake import ScriptedModel
from tests.support.orchestrators import build
from tests.test_approval_lifecycle import POLICY, _approval, _ask, _audit, _clocked, _conv, _decide, _invoker, _turn


def test_approved_then_expired_is_told_as_undecided(mocked_aws, gateway, tools):
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("rt-aprov-exp")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    resumed: list[str] = []
    assert _decide(ledger, approval, resumed)["ok"] is True   # approved; resume NOT run (say it failed/busy)
    silent = ScriptedModel()
    orch, _ = build(silent, ledger, invoker, **POLICY)
    before = orch.handle(_turn(conv, "e aí?"), Deadline.after(60))
    print("\nbefore expiry:", before.status, before.motivo, before.resposta)
    clock[0] += 601
    after = orch.handle(_turn(conv, "e agora?"), Deadline.after(60))
    print("after expiry:", after.status, after.motivo, after.resposta)
    print("record:", ApprovalStore(ledger).get(approval).status,
          [a["evento"] for a in _audit(ledger, conv)][-4:])
    assert "sem uma decisão" not in (after.resposta or ""), "customer told 'no decision' although a person approved"


def test_sweep_ignores_an_approved_unconsumed_expired_record(mocked_aws, gateway, tools):
    from cadencia_shared.models import ExpireRequest
    from decidir_aprovacao.logic import handle as decision_entry
    from tests.test_approval_lifecycle import APPROVERS

    ledger, clock = _clocked(mocked_aws)
    conv = _conv("rt-aprov-sweep")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval, [])["ok"] is True   # the resume it triggers is lost
    clock[0] += 601
    resumed: list[str] = []
    answer = decision_entry(ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS,
                            resume=resumed.append)
    print("\nsweep:", answer, resumed, ApprovalStore(ledger).get(approval).status,
          ledger.read_conversation(conv).status)
    assert approval in resumed, "the sweep never resumes an approved record whose resume was lost"

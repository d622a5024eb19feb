"""The approval flows on a CHAINED, anchored ledger (as deployed), then the audit
verifier (scripts/auditoria): approved and resumed; approved, cancelled, given back,
asked again (a fresh request, its own id), approved and resumed; refused as
infeasible; expired undecided by the sweep; approved but expired before its resume
(closed by the sweep). Every chain verifies intact, with no unanchored record."""

from __future__ import annotations

from cadencia_shared.audit_anchors import LedgerAnchors
from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import ItemType, Ledger
from cadencia_shared.models import ExpireRequest
from decidir_aprovacao.logic import handle as decision_entry
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from scripts import auditoria

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build
from .test_approval_lifecycle import APPROVERS, POLICY, REFUND, _approval, _conv, _decide, _give_back, _invoker, _turn


def _last_approval(ledger: Ledger, conv: str) -> str:
    return [i["aprovacaoId"] for i in ledger.history(conv, item_type=ItemType.APPROVAL)][-1]


def test_the_approval_flows_leave_every_chain_intact(mocked_aws, gateway, tools, erp, capsys):
    client, table = mocked_aws["dynamodb"], mocked_aws["ledger"].table_name
    clock = [1_800_000_000.0]
    chain = AuditChain(AUDIT_TABLE, client, anchor_table=table, clock=lambda: clock[0])
    ledger = Ledger(table, client, audit_chain=chain, clock=lambda: clock[0])
    invoker = _invoker(tools)

    def ask(conv, model=None):
        erp.execute("UPDATE pedidos SET valor_reembolsado = 0 WHERE id = '4821'")
        model = model or ScriptedModel(tool_use("emitir_reembolso", REFUND), text_reply("x"))
        orch, _ = build(model, ledger, invoker, **POLICY, APROVACAO_VALIDADE_S="600")
        return orch.handle(_turn(conv), Deadline.after(60)), orch

    # 1 approved + resumed
    a = _conv("v-aprov")
    _, orch = ask(a)
    _decide(ledger, _approval(ledger, a))
    Resumer.of(orch).resume(_approval(ledger, a), Deadline.after(60))
    # 2 approved, cancelled, resumed, given back
    b = _conv("v-cancel")
    _, orch = ask(b)
    first_b = _approval(ledger, b)
    _decide(ledger, first_b)
    ledger.request_cancellation(b)
    Resumer.of(orch).resume(first_b, Deadline.after(60))
    _give_back(ledger, b)
    _, orch = ask(b)  # asked again: a fresh request, its own id
    fresh = _last_approval(ledger, b)
    assert fresh != first_b
    _decide(ledger, fresh)
    assert Resumer.of(orch).resume(fresh, Deadline.after(60)).reason == "aprovada_executada"
    # 3 feasibility refusal (R$ 800 on an R$ 189.90 order)
    c = _conv("v-inviavel")
    ask(c, ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 800.0}), text_reply("ok")))
    # 4 expiry by the sweep + resume
    d = _conv("v-expira")
    _, orch = ask(d)
    # 5 approved, its resume lost, expired: closed by the sweep
    e = _conv("v-aprov-expira")
    ask(e)
    _decide(ledger, _approval(ledger, e))
    clock[0] += 601
    resumed: list[str] = []
    decision_entry(
        ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS, resume=resumed.append
    )
    assert sorted(resumed) == sorted([_approval(ledger, d), _approval(ledger, e)])
    reasons = sorted(Resumer.of(orch).resume(r, Deadline.after(60)).reason for r in resumed)
    assert reasons == ["aprovacao_expirada", "aprovada_expirada"]
    verifier = AuditChain(AUDIT_TABLE, client, anchor_table=table)
    code = auditoria.verify(verifier, None, LedgerAnchors(client, table).unchained_records())
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    assert "0 quebrada(s), 0 com registros sem âncora" in out

"""Red team of the read-decided ceiling refusal on the paths that run the control
chain without a normal turn: the approval resume carries no marks (it numbers on the
counter) and its commit must neither crash nor drop the conversation's marks.

Ceiling 1 (``TETO_TENTATIVAS``): the first refund is allowed (number 1 = the ceiling,
so the turn marks its key) and waits for approval; approved, the resume's own
attempt is numbered 2 by the counter and refused — the ceiling is not skipped."""

from __future__ import annotations

from cadencia_shared.ledger.exhausted import exhausted_key
from orchestrator.model import Deadline

from .test_approvals import _ask, _conv, _decide, _pending, _real_tools, _resumer


def test_the_resume_numbers_on_the_counter_and_keeps_the_marks(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("teto-marcado")
    invoker = _real_tools(tools)
    reply, _, orch = _ask(ledger, invoker, conv, TETO_TENTATIVAS="1")
    assert reply.status != "ativa", reply  # waiting for the approval
    key = exhausted_key("4821", "emitir_reembolso")
    assert ledger.read_conversation(conv).exhausted == {key: 1}
    record = _pending(ledger, conv)
    _decide(ledger, record.id)
    resumed = _resumer(orch).resume(record.id, Deadline.after(60))
    assert (resumed.status, resumed.reason) == ("aguardando_humano", "aprovada_nao_executada"), resumed
    assert gateway.debits_for(conv) == []
    links = [link for link in ledger.links(conv, "TETO_DE_TENTATIVAS_ATINGIDO")]
    assert [link["tentativaNumero"] for link in links] == [2]
    assert int(ledger.table.get(f"contador#{conv}#4821#emitir_reembolso")["tentativas"]) == 2  # the counter's
    assert ledger.read_conversation(conv).exhausted == {key: 1}  # the resume's commit left them
    assert [(a["tentativaNumero"], a["decisao"]) for a in ledger.attempts(conv)] == [
        (1, "permitida"), (2, "bloqueada_por_teto")]

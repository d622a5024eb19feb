"""Red team of the read-decided ceiling refusal on the paths that run the control
chain without a normal turn: the approval resume carries no marks and its commit must
neither crash nor drop the conversation's marks.

Ceiling 1 (``TETO_TENTATIVAS``): the first refund is allowed (number 1 = the ceiling,
so the turn marks its key) and waits for approval; approved, the resume runs that same
call under its number 1 (docs/decisions/approved-call-keeps-its-attempt-number.md): no
counter write, no refusal, the marks untouched — the ceiling still allowed one call."""

from __future__ import annotations

from cadencia_shared.ledger.exhausted import exhausted_key
from orchestrator.model import Deadline

from .test_approvals import _ask, _conv, _decide, _pending, _real_tools, _resumer


def test_the_resume_runs_under_the_asking_number_and_keeps_the_marks(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("teto-marcado")
    invoker = _real_tools(tools)
    reply, _, orch = _ask(ledger, invoker, conv, TETO_TENTATIVAS="1")
    assert reply.status != "ativa", reply  # waiting for the approval
    key = exhausted_key("4821", "emitir_reembolso")
    assert ledger.read_conversation(conv).exhausted == {key: 1}
    record = _pending(ledger, conv)
    _decide(ledger, record.id)
    resumed = _resumer(orch).resume(record.id, Deadline.after(60))
    assert (resumed.status, resumed.reason) == ("ativa", "aprovada_executada"), resumed
    assert len(gateway.debits_for(conv)) == 1
    assert list(ledger.links(conv, "TETO_DE_TENTATIVAS_ATINGIDO")) == []
    assert int(ledger.table.get(f"contador#{conv}#4821#emitir_reembolso")["tentativas"]) == 1  # no new number
    assert ledger.read_conversation(conv).exhausted == {key: 1}  # the resume's commit left them
    assert [(a["tentativaNumero"], a["decisao"], a["resultado"]) for a in ledger.attempts(conv)] == [
        (1, "permitida", "executado")]

"""A tool call's outcome is written once — on its ``CHAMADA_DE_FERRAMENTA`` link — and
read back on the attempt record by the join (``Ledger.attempts``).

Real orchestrator turns on the local stack's moto server (real audit chain, real
ledger); the failing link write is a real ``ResourceNotFoundException`` from it.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.attempts import CALL_EVENT, attempt_records, with_outcomes
from cadencia_shared.ledger.table import counter_pk
from orchestrator.events import TurnRequest
from orchestrator.invokers import Invocation, InvocationStatus
from orchestrator.model import Deadline
from scripts.harness import disjuntor
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import CountingInvoker, build
from .test_decision_links import SequenceInvoker, tables  # noqa: F401 - the private tables fixture, reused

STATUS = "consultar_status_pedido"
PROFILE = "atualizar_cadastro"


def _tables(tables, local_stack) -> tuple:
    return (session_client("dynamodb", local_stack.aws_endpoint), *tables)


def test_the_outcome_is_on_the_link_only_and_the_record_reads_it_back(tables, local_stack):
    """Three calls of one round (answered, refused by the tool, timed out): the counter
    items' records carry no ``resultado`` (no second write), the links carry the
    outcome with ``assunto``, and ``Ledger.attempts`` shows each record with its own
    link's outcome — matched by subject and number, not by position."""
    ddb, audit_name, ledger_name = _tables(tables, local_stack)
    ledger = Ledger(ledger_name, ddb, audit_chain=AuditChain(audit_name, ddb, anchor_table=ledger_name))
    conv = f"conv-saida-{uuid.uuid4().hex[:8]}"
    invoker = SequenceInvoker(
        Invocation(InvocationStatus.OK, payload={"ok": True, "resultado": "consultado", "dados": {}}),
        Invocation(InvocationStatus.OK, payload={"ok": False, "erro": {"codigo": "pedido_inexistente"}}),
        Invocation(InvocationStatus.TIMEOUT))
    model = ScriptedModel(
        tool_uses((STATUS, {"pedidoId": "4821"}), (STATUS, {"pedidoId": "9999"}), (STATUS, {"pedidoId": "4821"})),
        text_reply("Conferi."))
    orch, _ = build(model, ledger, invoker)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="wamid.1", mensagem="status"),
                Deadline.after(60))
    for subject in ("4821", "9999"):
        counter = ledger.table.get(counter_pk(conv, subject, STATUS))
        assert counter["registros"] and all(set(r) == {"timestamp", "teto"} for r in counter["registros"])
    chain = list(ledger.audit_chain.records(conv))
    links = [json.loads(r["detalhes"]) for r in chain if r["evento"] == CALL_EVENT]
    assert [(x["assunto"], x["tentativaNumero"], x["resultado"]) for x in links] == [
        ("4821", 1, "executado"), ("9999", 1, "recusado_pela_ferramenta"), ("4821", 2, "erro_da_ferramenta")]
    joined = sorted((a["assunto"], a["tentativaNumero"], a["resultado"], a.get("detalhe"))
                    for a in ledger.attempts(conv))
    assert joined == [("4821", 1, "executado", None), ("4821", 2, "erro_da_ferramenta", "tempo_esgotado"),
                      ("9999", 1, "recusado_pela_ferramenta", "pedido_inexistente")]
    # The links a caller read already (scripts/harness/disjuntor.py) give the same join.
    assert list(ledger.attempts(conv, chain=chain)) == list(ledger.attempts(conv))


def test_the_breaker_harness_reads_each_conversation_chain_once(tables, local_stack, monkeypatch):
    """scripts/harness/disjuntor.py's figures: one read of each conversation's chain
    gives both the audited events and the calls' outcomes."""
    ddb, audit_name, ledger_name = _tables(tables, local_stack)
    ledger = Ledger(ledger_name, ddb, audit_chain=AuditChain(audit_name, ddb, anchor_table=ledger_name))
    conv = f"conv-disjuntor-{uuid.uuid4().hex[:8]}"
    invoker = SequenceInvoker(Invocation(InvocationStatus.TIMEOUT), Invocation(InvocationStatus.TIMEOUT))
    orch, _ = build(ScriptedModel(tool_uses((STATUS, {"pedidoId": "4821"}), (STATUS, {"pedidoId": "4821"})),
                                  text_reply("Conferi.")), ledger, invoker)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="wamid.1", mensagem="status"),
                Deadline.after(60))
    reads: list[str] = []
    chain_records = AuditChain.records
    monkeypatch.setattr(AuditChain, "records", lambda chain, name: reads.append(name) or chain_records(chain, name))
    monkeypatch.setattr(disjuntor, "AUDIT_TABLE", audit_name)
    figures = disjuntor._figures(ledger, [conv], Counter(), {}, 5)
    assert reads == [conv]
    assert figures["chamadasQueChegaramAFerramenta"] == 2
    assert figures["resultadosDessasChamadas"] == {"erro_da_ferramenta": 2}


def _turn_with_a_broken_chain(tables, local_stack, tool: str, arguments: dict, answer: dict):  # noqa: ANN001, ANN202
    ddb, audit_name, ledger_name = _tables(tables, local_stack)
    broken = AuditChain(f"ausente-{uuid.uuid4().hex[:8]}", ddb, anchor_table=ledger_name)
    conv = f"conv-saida-{uuid.uuid4().hex[:8]}"
    invoker = CountingInvoker(answer=answer)
    orch, _ = build(ScriptedModel(tool_use(tool, arguments), text_reply("x")),
                    Ledger(ledger_name, ddb, audit_chain=broken), invoker)
    with pytest.raises(ClientError):
        orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="wamid.f", mensagem="oi"),
                    Deadline.after(60))
    assert invoker.calls[tool] == 1
    reader = Ledger(ledger_name, ddb, audit_chain=AuditChain(audit_name, ddb, anchor_table=ledger_name))
    return conv, reader


def test_a_link_write_that_fails_fails_the_turn_loudly_and_leaves_the_attempt_pending(tables, local_stack, caplog):
    """The chain's table is missing (a real ClientError from the server): the tool ran
    once, the turn raises instead of answering, the failure is logged with the ids and
    the outcome (never the arguments), and the attempt stays counted and ``pendente``,
    found by conversation (a call that changes something: its counter is indexed)."""
    conv, reader = _turn_with_a_broken_chain(tables, local_stack, PROFILE, {"campos": {"email": "ana@example.com"}},
                                             {"ok": True, "resultado": "atualizado"})
    logged = [r for r in caplog.records if r.getMessage() == "call outcome link not written"]
    assert [(r.levelname, r.ferramenta, r.tentativaNumero) for r in logged] == [("ERROR", PROFILE, 1)]
    assert "example.com" not in json.dumps([vars(r) for r in logged], default=str)
    assert [(a["tentativaNumero"], a["decisao"], a["resultado"]) for a in reader.attempts(conv)] == [
        (1, "permitida", "pendente")]


def test_a_read_only_call_without_its_link_is_on_its_counter_not_in_the_conversations_list(tables, local_stack):
    """A read-only call changes nothing, so its counter stays out of the history index
    (one write unit less on the first call at a key): without its link it is not listed
    by conversation, and its ``pendente`` record is still on the counter, read by key."""
    conv, reader = _turn_with_a_broken_chain(tables, local_stack, STATUS, {"pedidoId": "4821"},
                                             {"ok": True, "resultado": "consultado", "dados": {"status": "entregue"}})
    assert list(reader.attempts(conv)) == []
    counter = reader.table.get(counter_pk(conv, "4821", STATUS))
    assert [(r["tentativaNumero"], r["resultado"]) for r in attempt_records(counter)] == [(1, "pendente")]
    assert "conversaId" not in counter  # not in the history index


def _record(subject: str, number: int, ceiling: int) -> dict:
    allowed = number <= ceiling
    return {"ferramenta": STATUS, "assunto": subject, "tentativaNumero": number,
            "decisao": "permitida" if allowed else "bloqueada_por_teto",
            "resultado": "pendente" if allowed else "bloqueado_por_teto"}


@given(numbers=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=8, unique=True),
       linked=st.lists(st.integers(min_value=0, max_value=10), max_size=10),
       ceiling=st.integers(min_value=1, max_value=5))
@settings(max_examples=200, deadline=None)
def test_the_join_never_gives_a_refused_or_unlinked_record_an_outcome(numbers, linked, ceiling):
    """Any links (also for refused numbers, other subjects, or numbers never recorded):
    an allowed record gets exactly its own link's outcome, else stays ``pendente``; a
    refused record stays ``bloqueado_por_teto``."""
    records = [_record("4821", n, ceiling) for n in numbers]
    links = [{"ferramenta": STATUS, "assunto": "4821", "tentativaNumero": n, "resultado": f"r{n}"} for n in linked]
    links += [{"ferramenta": STATUS, "assunto": "9999", "tentativaNumero": n, "resultado": "outro"} for n in numbers]
    for record in with_outcomes(records, links):
        n = record["tentativaNumero"]
        if n > ceiling:
            assert record["resultado"] == "bloqueado_por_teto"
        else:
            assert record["resultado"] == (f"r{n}" if n in linked else "pendente")


def test_the_output_contract_counts_only_links_within_the_ceiling(tables, local_stack):
    """``attempt_results`` reads the links of (tool, subject) numbered 1..limit: a link
    past the ceiling, of another subject, or with a boolean number is not evidence."""
    ddb, audit_name, ledger_name = _tables(tables, local_stack)
    ledger = Ledger(ledger_name, ddb, audit_chain=AuditChain(audit_name, ddb, anchor_table=ledger_name))
    conv = f"conv-saida-{uuid.uuid4().hex[:8]}"
    tool, subject = "atualizar_cadastro", "cliente-1001"
    for details in ({"tentativaNumero": 5, "resultado": "executado"},
                    {"tentativaNumero": True, "resultado": "executado"},
                    {"tentativaNumero": 1, "resultado": "executado", "assunto": "cliente-2002"},
                    {"tentativaNumero": 2, "resultado": "recusado_pela_ferramenta"}):
        ledger.append_audit(conversation_id=conv, event=CALL_EVENT,
                            details={"ferramenta": tool, "assunto": subject, **details})
    assert ledger.attempt_results(conversation_id=conv, subject=subject, tool=tool, limit=4) == [
        "recusado_pela_ferramenta"]

"""The tamper-evident audit trail on the local stack's moto
server, each test on a private table: a clean chain verifies; an edited, a deleted
and a reordered record are each reported at the right link, by the library and by
``scripts/auditoria verificar``; concurrent appends from separate OS processes never
fork the chain; personal data is masked; the orchestrator's records go through it."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from cadencia_shared.audit_chain import GENESIS, AuditChain, Broken, record_hash, table_definition
from cadencia_shared.ledger import Ledger, table_definition as ledger_definition
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, tool_use
from .support.orchestrators import CountingInvoker, build

ROOT = Path(__file__).resolve().parents[1]
CONV = "conv-auditada"


@pytest.fixture
def audit(local_stack):
    """A private audit table, its heads anchored in a private ledger table (as every
    writer of the stack anchors: a chain no anchor acknowledges is flagged)."""
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    name, ledger_name = f"auditoria-teste-{uuid.uuid4().hex[:10]}", f"cadencia-ancora-{uuid.uuid4().hex[:10]}"
    ddb.create_table(**table_definition(name))
    ddb.create_table(**ledger_definition(ledger_name))
    yield AuditChain(name, ddb, anchor_table=ledger_name)
    ddb.delete_table(TableName=name)
    ddb.delete_table(TableName=ledger_name)


@pytest.fixture
def chained_ledger(audit):
    """The ledger table ``audit`` anchors in, its audit records going to ``audit``'s chain."""
    yield Ledger(audit.anchor_table, audit.client, audit_chain=audit)


def _fill(chain: AuditChain, n: int = 5) -> None:
    for i in range(n):
        chain.append(conversation_id=CONV, event="DECISAO", details={"i": i})


def _raw(chain: AuditChain, seq: int) -> dict:
    return chain.client.get_item(TableName=chain.table_name,
                                 Key={"cadeia": {"S": CONV}, "seq": {"N": str(seq)}})["Item"]


def _verifier(local_stack, chain: AuditChain, *args: str) -> subprocess.CompletedProcess:
    return _anchored_verifier(local_stack, chain, *args)


def test_a_clean_chain_links_every_record_to_the_previous_one(audit, local_stack):
    _fill(audit)
    records = list(audit.records(CONV))
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    assert records[0]["hashAnterior"] == GENESIS
    assert all(b["hashAnterior"] == a["hash"] for a, b in zip(records, records[1:], strict=False))
    assert audit.verify(CONV) == (5, None)
    out = _verifier(local_stack, audit, "--conversa", CONV)
    assert out.returncode == 0 and "íntegra (5 registros)" in out.stdout


def test_an_edited_record_is_reported_at_its_link(audit, local_stack):
    _fill(audit)
    audit.client.update_item(TableName=audit.table_name, Key={"cadeia": {"S": CONV}, "seq": {"N": "3"}},
                             UpdateExpression="SET detalhes = :d",
                             ExpressionAttributeValues={":d": {"S": json.dumps({"i": 99})}})
    checked, broken = audit.verify(CONV)
    assert (checked, broken.seq, broken.problem) == (2, 3, "conteudo_alterado")
    out = _verifier(local_stack, audit)
    assert out.returncode == 1 and "seq=3 (conteudo_alterado)" in out.stdout


def test_an_edit_that_also_recomputes_its_own_hash_breaks_the_next_link(audit):
    _fill(audit)
    item = {k: v for k, v in _raw(audit, 3).items()}
    record = {"cadeia": CONV, "seq": 3, "evento": item["evento"]["S"], "registradoEm": item["registradoEm"]["S"],
              "detalhes": json.dumps({"i": 99}), "hashAnterior": item["hashAnterior"]["S"]}
    item["detalhes"], item["hash"] = {"S": record["detalhes"]}, {"S": record_hash(record)}
    audit.client.put_item(TableName=audit.table_name, Item=item)
    _, broken = audit.verify(CONV)
    assert (broken.seq, broken.problem) == (4, "elo_quebrado")


def test_a_deleted_record_is_reported_as_missing(audit, local_stack):
    _fill(audit)
    audit.client.delete_item(TableName=audit.table_name, Key={"cadeia": {"S": CONV}, "seq": {"N": "2"}})
    checked, broken = audit.verify(CONV)
    assert (checked, broken.seq, broken.problem) == (1, 2, "faltando")
    out = _verifier(local_stack, audit, "--conversa", CONV)
    assert out.returncode == 1 and "seq=2 (faltando)" in out.stdout


def test_reordered_records_are_reported(audit):
    """Records 2 and 3 swapped (each one's content moved to the other's position)."""
    _fill(audit)
    two, three = _raw(audit, 2), _raw(audit, 3)
    two["seq"], three["seq"] = {"N": "3"}, {"N": "2"}
    for item in (two, three):
        audit.client.put_item(TableName=audit.table_name, Item=item)
    _, broken = audit.verify(CONV)
    assert (broken.seq, broken.problem) == (2, "elo_quebrado")


def test_personal_data_is_masked_and_the_verifier_refuses_hostile_ids(audit, local_stack):
    audit.append(conversation_id=CONV, event="CADASTRO_ATUALIZADO",
                 details={"campos": {"email": "ana@example.com", "telefone": "+5511999998888"}, "cpf": "12345678909"})
    (record,) = audit.records(CONV)
    assert "ana@example.com" not in json.dumps(record) and "999998888" not in json.dumps(record)
    assert "12345678909" not in json.dumps(record)
    campos = json.loads(record["detalhes"])["campos"]
    assert (campos["email"], campos["telefone"]) == ("********om", "********88")  # masked, not hashed
    assert json.loads(record["detalhes"])["cpf"] == "********09"
    assert _verifier(local_stack, audit, "--conversa", "x#y").returncode == 2


def _append_many(endpoint: str, table: str, writer: int, n: int) -> None:
    chain = AuditChain(table, session_client("dynamodb", endpoint))
    for i in range(n):
        chain.append(conversation_id=CONV, event="DECISAO", details={"escritor": writer, "i": i})


def run_to_completion(target, argsets) -> None:  # noqa: ANN001 - a picklable function, its args
    """One spawned OS process per ``args`` in ``argsets``, started together; each must exit 0."""
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in argsets]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=240)
        assert proc.exitcode == 0


def test_concurrent_appends_from_separate_processes_never_fork(audit, local_stack):
    run_to_completion(_append_many, [(local_stack.aws_endpoint, audit.table_name, w, 12) for w in range(4)])
    records = list(audit.records(CONV))
    assert [r["seq"] for r in records] == list(range(1, 49))
    assert len({r["hashAnterior"] for r in records}) == 48  # no two records claim the same predecessor
    assert audit.verify(CONV) == (48, None)


def test_two_refusals_in_one_round_are_two_links(audit, chained_ledger, local_stack):
    """Two refund calls of one round refused by the ceiling: one turn, one hand-off,
    and still one link per refusal (each naming the hand-off), no third link for the
    hand-off; the chain verifies (in process and with ``scripts/auditoria verificar``)."""
    from .support.anthropic_fake import tool_uses

    ledger = chained_ledger
    call = ("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0})
    model = ScriptedModel(tool_uses(call, call, call), tool_uses(call, call, call))
    invoker = CountingInvoker(answer={"ok": True, "resultado": "executado", "dados": {}})
    orch, _ = build(model, ledger, invoker, MAX_RODADAS_POR_TURNO="20")
    reply = orch.handle(TurnRequest(conversaId=CONV, clienteId=1001, mensagemId="wamid.b1", mensagem="reembolso"),
                        Deadline.after(60))
    assert reply.motivo == "teto" and invoker.calls["emitir_reembolso"] == 4
    records = list(audit.records(CONV))
    assert [r["evento"] for r in records] == ["CHAMADA_DE_FERRAMENTA"] * 4 + ["TETO_DE_TENTATIVAS_ATINGIDO"] * 2
    refusals = [json.loads(r["detalhes"]) for r in records[4:]]
    assert [(r["tentativaNumero"], r["motivo"], r["mensagemId"]) for r in refusals] == [
        (5, "teto", "wamid.b1"), (6, "teto", "wamid.b1")]
    assert audit.verify(CONV) == (6, None)
    assert _verifier(local_stack, audit, "--conversa", CONV).returncode == 0


def test_the_orchestrators_records_go_through_the_chain(audit, chained_ledger, local_stack):
    """Each of the four allowed refund calls leaves one link (decision and
    outcome); the fifth is refused by the ceiling and handed off, ONE link for
    both (the refusal names the hand-off's reason and message): every record is a
    link of the conversation's chain, none is a ledger item."""
    ledger = chained_ledger
    refund = ("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0})
    model = ScriptedModel(*[tool_use(*refund) for _ in range(5)])
    orch, _ = build(model, ledger, CountingInvoker(answer={"ok": True, "resultado": "executado", "dados": {}}),
                    MAX_RODADAS_POR_TURNO="20")
    reply = orch.handle(TurnRequest(conversaId=CONV, clienteId=1001, mensagemId="wamid.a1", mensagem="reembolso"),
                        Deadline.after(60))
    assert reply.motivo == "teto"
    records = list(audit.records(CONV))
    assert [r["evento"] for r in records] == ["CHAMADA_DE_FERRAMENTA"] * 4 + ["TETO_DE_TENTATIVAS_ATINGIDO"]
    # The 4th allowed call marked its key: the 5th is refused from the mark,
    # with the same link as a refusal the counter numbered.
    assert json.loads(records[4]["detalhes"]) == {
        "ferramenta": "emitir_reembolso", "assunto": "4821", "pedidoId": "4821", "tentativaNumero": 5,
        "teto": 4, "motivo": "teto", "mensagemId": "wamid.a1"}
    calls = [json.loads(r["detalhes"]) for r in records[:4]]
    assert [(c["ferramenta"], c["pedidoId"], c["decisao"], c["resultado"], c["tentativaNumero"]) for c in calls] == [
        ("emitir_reembolso", "4821", "permitida", "executado", n) for n in range(1, 5)]
    assert audit.verify(CONV) == (5, None)
    assert _verifier(local_stack, audit, "--conversa", CONV).returncode == 0
    assert list(ledger.history(CONV, item_type=None)) and not [
        i for i in ledger.history(CONV) if i.get("tipo") == "auditoria"]


# --- the head anchored in the ledger (tail truncation) -------------------------------


@pytest.fixture
def anchored(audit):
    """The audit table above, its heads anchored in its private ledger table."""
    return audit


def _anchored_verifier(local_stack, chain: AuditChain, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "CADENCIA_LOCAL_STACK_DIR": local_stack.directory,
           "AUDIT_TABLE": chain.table_name, "LEDGER_TABLE": chain.anchor_table}
    return subprocess.run([str(ROOT / "scripts" / "auditoria"), "verificar", "--local", *args], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)


def _delete(chain: AuditChain, *seqs: int) -> None:
    for seq in seqs:
        chain.client.delete_item(TableName=chain.table_name, Key={"cadeia": {"S": CONV}, "seq": {"N": str(seq)}})


def test_the_head_is_anchored_in_the_ledger_at_every_append(anchored):
    _fill(anchored)
    last = list(anchored.records(CONV))[-1]
    assert (anchored.head(CONV).seq, anchored.head(CONV).hash) == (5, last["hash"])
    assert anchored.verify(CONV) == (5, None)


def test_deleting_the_last_record_is_reported(anchored, local_stack):
    _fill(anchored)
    _delete(anchored, 5)
    checked, broken = anchored.verify(CONV)
    assert (checked, broken.seq, broken.problem) == (4, 5, "cauda_truncada")
    out = _anchored_verifier(local_stack, anchored, "--conversa", CONV)
    assert out.returncode == 1 and "seq=5 (cauda_truncada)" in out.stdout


def test_deleting_every_record_of_a_chain_is_reported_by_the_full_pass(anchored, local_stack):
    _fill(anchored, 3)
    _delete(anchored, 1, 2, 3)
    assert anchored.chains() == []  # the audit table alone no longer knows the chain
    out = _anchored_verifier(local_stack, anchored)
    assert out.returncode == 1 and f"{CONV}: QUEBRADA no registro seq=1 (cauda_truncada)" in out.stdout


def test_a_deleted_and_rewritten_tail_is_reported(anchored):
    """The last two records deleted and two others appended in their place by a
    writer that cannot reach the anchor: the chain is whole, the anchor disagrees."""
    _fill(anchored)
    _delete(anchored, 4, 5)
    forger = AuditChain(anchored.table_name, anchored.client)  # no anchor table: the deleter's reach
    forger.append(conversation_id=CONV, event="DECISAO", details={"i": "forjado-4"})
    forger.append(conversation_id=CONV, event="DECISAO", details={"i": "forjado-5"})
    checked, broken = anchored.verify(CONV)
    assert (checked, broken.seq, broken.problem) == (5, 5, "ancora_divergente")


def test_an_anchor_behind_the_chain_is_accepted(anchored):
    """A writer killed between its record and its anchor leaves the anchor one link
    behind: not a truncation, and the links after it are still hash-checked."""
    _fill(anchored, 3)
    AuditChain(anchored.table_name, anchored.client).append(conversation_id=CONV, event="DECISAO", details={})
    assert anchored.head(CONV).seq == 3 and anchored.verify(CONV) == (4, None)
    # Accepted, not called intact: the link no anchor acknowledges is counted (the verifier flags it).
    report = anchored.check(CONV)
    assert (report.broken, report.unanchored, report.unanchored_from) == (None, 1, 4)


def _append_anchored_forever(endpoint: str, table: str, ledger_table: str) -> None:
    chain = AuditChain(table, session_client("dynamodb", endpoint), anchor_table=ledger_table)
    for i in range(10_000):
        chain.append(conversation_id=CONV, event="DECISAO", details={"i": i})


def sigkill_writers_after(chain: AuditChain, endpoint: str, writer, *, records: int) -> None:  # noqa: ANN001
    """Three spawned processes run ``writer(endpoint, table, anchor table)`` on one
    chain (or one process per writer, given a tuple of them); each is SIGKILLed once
    the chain holds ``records`` records (or after 120 s)."""
    ctx = mp.get_context("spawn")
    writers = writer if isinstance(writer, tuple) else (writer,) * 3
    procs = [ctx.Process(target=w, args=(endpoint, chain.table_name, chain.anchor_table)) for w in writers]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + 120
    while len(list(chain.records(CONV))) < records and time.monotonic() < deadline:
        time.sleep(0.2)
    for proc in procs:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=30)


def test_writers_sigkilled_mid_append_never_leave_a_false_truncation(anchored, local_stack):
    """Three processes append to one chain and are SIGKILLed mid-flight (between a
    record and its anchor, or inside either write): the chain verifies, its anchor
    never ahead of it (each writer killed between its record and its anchor leaves it
    at most one link further behind); then the tail deleted from the head is reported."""
    sigkill_writers_after(anchored, local_stack.aws_endpoint, _append_anchored_forever, records=30)
    checked, broken = anchored.verify(CONV)
    assert checked >= 30 and broken is None
    assert anchored.head(CONV).seq <= checked
    head = anchored.head(CONV).seq
    # What the verifier flags after the kills: the links past the anchor, at most one per killed writer.
    assert anchored.check(CONV).unanchored == checked - head <= 3
    _delete(anchored, *range(head, checked + 1))  # the tail from the anchored head on
    assert anchored.verify(CONV) == (head - 1, Broken(CONV, head, "cauda_truncada"))


# --- records written outside the chain -------------------------------------------


def test_audit_records_outside_the_chain_are_flagged_by_the_verifier(anchored, local_stack):
    """A writer built without the chain leaves ``auditoria#`` items in the ledger: the
    chains themselves are intact, but the verifier says those records exist, how many
    and for which chain, and does not exit 0."""
    _fill(anchored, 2)
    bare = Ledger(anchored.anchor_table, anchored.client)  # no audit_chain: the fallback
    bare.append_audit(conversation_id=CONV, event="ATENDENTE_DEVOLVEU_AO_AGENTE", details={})
    bare.append_audit(conversation_id=None, event="APROVACAO_DECIDIDA", details={})
    for args in (("--conversa", CONV), ()):
        out = _anchored_verifier(local_stack, anchored, *args)
        assert out.returncode == 4, out.stdout + out.stderr
        assert "FORA DA CADEIA" in out.stdout and "0 quebrada(s)" in out.stdout
    assert "1 registro(s) de auditoria fora da cadeia" in _anchored_verifier(
        local_stack, anchored, "--conversa", CONV).stdout
    assert "2 registro(s) de auditoria fora da cadeia" in _anchored_verifier(local_stack, anchored).stdout

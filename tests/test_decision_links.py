"""Every tool-call decision is one link of the conversation's audit chain:
``controls.DecisionAudit`` links each invoked call with its decision and
outcome; a refused call keeps its refusing control's single link. Real local stack
(moto server), the real SDK against a scripted model, the verifier as a process.
"""

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

from cadencia_shared.audit_chain import AuditChain, table_definition
from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger import table_definition as ledger_definition
from cadencia_shared.ledger.attempts import attempt_records
from cadencia_shared.ledger.table import counter_pk
from orchestrator.events import TurnRequest
from orchestrator.invokers import Invocation, InvocationStatus
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import build

ROOT = Path(__file__).resolve().parents[1]
STATUS = "consultar_status_pedido"


@pytest.fixture
def tables(local_stack):
    """A private audit table and a private ledger (the chain's anchor table)."""
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    audit_name, ledger_name = (f"{p}-{uuid.uuid4().hex[:10]}" for p in ("auditoria-elos", "cadencia-elos"))
    ddb.create_table(**table_definition(audit_name))
    ddb.create_table(**ledger_definition(ledger_name))
    yield audit_name, ledger_name
    for name in (audit_name, ledger_name):
        ddb.delete_table(TableName=name)


def _ledger(endpoint: str, audit_name: str, ledger_name: str) -> tuple[Ledger, AuditChain]:
    ddb = session_client("dynamodb", endpoint)
    chain = AuditChain(audit_name, ddb, anchor_table=ledger_name)
    return Ledger(ledger_name, ddb, audit_chain=chain), chain


class SequenceInvoker:
    """Answers each invocation with the next scripted ``Invocation``."""

    def __init__(self, *answers: Invocation) -> None:
        self.answers = list(answers)

    def invoke(self, tool, event):  # noqa: ANN001, ANN201 - the ToolInvoker protocol
        return self.answers.pop(0)


def _links(chain: AuditChain, conv: str) -> list[dict]:
    return [json.loads(r["detalhes"]) | {"evento": r["evento"]} for r in chain.records(conv)]


def _verifier(local_stack, audit_name: str, ledger_name: str, conv: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "CADENCIA_LOCAL_STACK_DIR": local_stack.directory,
           "AUDIT_TABLE": audit_name, "LEDGER_TABLE": ledger_name}
    return subprocess.run([str(ROOT / "scripts" / "auditoria"), "verificar", "--local", "--conversa", conv],
                          env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)


def test_every_invoked_call_of_a_conversation_leaves_one_link_with_its_outcome(tables, local_stack):
    """Three calls in one round — answered, refused by the tool, timed out — then a
    second turn's call: four links, in order, each with the tool, the order, the
    attempt number and the outcome enum; the verifier (a separate process) passes."""
    audit_name, ledger_name = tables
    ledger, chain = _ledger(local_stack.aws_endpoint, audit_name, ledger_name)
    conv = f"conv-elos-{uuid.uuid4().hex[:8]}"
    invoker = SequenceInvoker(
        Invocation(InvocationStatus.OK, payload={"ok": True, "resultado": "consultado", "dados": {}}),
        Invocation(InvocationStatus.OK, payload={"ok": False, "erro": {"codigo": "pedido_inexistente"}}),
        Invocation(InvocationStatus.TIMEOUT),
        Invocation(InvocationStatus.OK, payload={"ok": True, "resultado": "consultado", "dados": {}}),
    )
    model = ScriptedModel(
        tool_uses((STATUS, {"pedidoId": "4821"}), (STATUS, {"pedidoId": "9999"}), (STATUS, {"pedidoId": "4821"})),
        text_reply("Conferi."), tool_use(STATUS, {"pedidoId": "4821"}), text_reply("Conferi de novo."))
    orch, _ = build(model, ledger, invoker)
    for n in (1, 2):
        orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{n}", mensagem="status"),
                    Deadline.after(60))
    links = [(x["evento"], x["ferramenta"], x["pedidoId"], x["decisao"], x["resultado"], x["detalhe"],
              x["tentativaNumero"]) for x in _links(chain, conv)]
    assert links == [
        ("CHAMADA_DE_FERRAMENTA", STATUS, "4821", "permitida", "executado", None, 1),
        ("CHAMADA_DE_FERRAMENTA", STATUS, "9999", "permitida", "recusado_pela_ferramenta", "pedido_inexistente", 1),
        ("CHAMADA_DE_FERRAMENTA", STATUS, "4821", "permitida", "erro_da_ferramenta", "tempo_esgotado", 2),
        ("CHAMADA_DE_FERRAMENTA", STATUS, "4821", "permitida", "executado", None, 3),
    ]
    assert chain.verify(conv) == (4, None)
    verified = _verifier(local_stack, audit_name, ledger_name, conv)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_link_never_carries_the_calls_arguments(tables, local_stack):
    """The profile tool's arguments (an e-mail, a phone) are nowhere in the link."""
    audit_name, ledger_name = tables
    ledger, chain = _ledger(local_stack.aws_endpoint, audit_name, ledger_name)
    conv = f"conv-elos-{uuid.uuid4().hex[:8]}"
    arguments = {"campos": {"email": "ana.souza@example.com", "telefone": "+5511987654321"}}
    invoker = SequenceInvoker(Invocation(InvocationStatus.OK, payload={"ok": True, "resultado": "atualizado"}))
    orch, _ = build(ScriptedModel(tool_use("atualizar_cadastro", arguments), text_reply("Mais alguma dúvida?")),
                    ledger, invoker)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="wamid.p", mensagem="cadastro"),
                Deadline.after(60))
    raw = json.dumps(list(chain.records(conv)))
    links = _links(chain, conv)
    assert [x["evento"] for x in links] == ["CHAMADA_DE_FERRAMENTA"]
    assert links[0]["resultado"] == "executado"
    for value in ("ana.souza", "example.com", "987654321", "98765"):
        assert value not in raw


def _turn_killed_inside_the_call(endpoint: str, audit_name: str, ledger_name: str, conv: str, marker: str) -> None:
    """A whole orchestrator turn whose tool call never returns: the parent SIGKILLs
    this process while the call is in flight (after the attempt was recorded and
    the tool ran, before any after-step)."""
    ledger, _ = _ledger(endpoint, audit_name, ledger_name)

    class Hanging:
        def invoke(self, tool, event):  # noqa: ANN001, ANN201
            Path(marker).write_text("invoked")
            time.sleep(600)

    orch, _ = build(ScriptedModel(tool_use(STATUS, {"pedidoId": "4821"}), text_reply("x")), ledger, Hanging())
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="wamid.k", mensagem="status"),
                Deadline.after(600))


def test_sigkill_between_invoke_and_link_leaves_the_attempt_record_as_the_evidence(tables, local_stack, tmp_path):
    """The chain then has no link for the killed call and still verifies; the
    ledger's attempt record (written before the invoke) stays ``pendente``; the
    next call at the same key is attempt 2 and its link says so — the ceiling
    counted the call the chain never saw."""
    audit_name, ledger_name = tables
    conv = f"conv-elos-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "invoked"
    proc = mp.get_context("spawn").Process(target=_turn_killed_inside_the_call, args=(
        local_stack.aws_endpoint, audit_name, ledger_name, conv, str(marker)))
    proc.start()
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline and proc.is_alive():
        time.sleep(0.05)
    assert marker.exists(), "the child never reached the tool call"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL

    ledger, chain = _ledger(local_stack.aws_endpoint, audit_name, ledger_name)
    assert list(chain.records(conv)) == []
    assert chain.verify(conv) == (0, None)
    # The record, on its counter (read by key): a read-only call's counter stays out of the
    # history index, so until a link names it the conversation's list does not show it.
    counter = ledger.table.get(counter_pk(conv, "4821", STATUS))
    assert [(r["tentativaNumero"], r["resultado"]) for r in attempt_records(counter)] == [(1, "pendente")]
    assert list(ledger.attempts(conv)) == []
    assert ledger.attempt_results(conversation_id=conv, subject="4821", tool=STATUS, limit=4) == []

    # The killed turn's lease runs out (as time would make it) before the next turn.
    ledger.table.client.update_item(TableName=ledger_name, Key={"pk": {"S": f"conversa#{conv}"}},
                                    UpdateExpression="SET leaseAteMs = :zero",
                                    ExpressionAttributeValues={":zero": {"N": "0"}})
    invoker = SequenceInvoker(Invocation(InvocationStatus.OK, payload={"ok": True, "resultado": "consultado"}))
    orch, _ = build(ScriptedModel(tool_use(STATUS, {"pedidoId": "4821"}), text_reply("ok")), ledger, invoker)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="wamid.k2", mensagem="status"),
                Deadline.after(60))
    (link,) = _links(chain, conv)
    assert (link["resultado"], link["tentativaNumero"]) == ("executado", 2)
    assert chain.verify(conv) == (1, None)
    assert [(r["tentativaNumero"], r["resultado"]) for r in ledger.attempts(conv)] == [(1, "pendente"),
                                                                                       (2, "executado")]


def test_a_tools_error_code_is_clipped_alike_in_the_link_and_the_attempt_record():
    from cadencia_shared.ledger.attempts import RESULT_DETAIL_MAX
    from orchestrator.controls import _recorded_outcome

    answered = Invocation(InvocationStatus.OK, payload={"ok": False, "erro": {"codigo": "x" * 5000}})
    result, detail = _recorded_outcome(answered)
    assert result.value == "recusado_pela_ferramenta" and detail == "x" * RESULT_DETAIL_MAX
    assert _recorded_outcome(Invocation(InvocationStatus.OK, payload={"ok": False, "erro": {}}))[1] is None

"""The retry ceiling, end to end: real SDK, real ledger, real tools where it matters."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import ConversationStatus, ItemType, Ledger
from cadencia_shared.ledger.attempts import REFUSALS_LISTED
from cadencia_shared.ledger.table import counter_pk
from orchestrator.controls import RetryCeiling
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from orchestrator.tools import ToolCall
from scripts.local_stack.aws import session_client
from scripts.local_stack.emf import capture_emf

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import CountingInvoker, build

HANDOFF = ("Não consigo confirmar isso automaticamente depois de várias tentativas — "
           "vou encaminhar para um atendente humano revisar o pedido 4821.")


def _turn(conv: str, text: str = "já caiu?", cliente: int = 1001) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=cliente, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _insistent(payload):
    return tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 189.9}, text="Vou tentar de novo.")


def test_insistent_model_gets_exactly_four_invocations_and_the_fifth_is_refused(mocked_aws):
    model = ScriptedModel(default=_insistent)
    invoker = CountingInvoker(answer={"ok": True, "resultado": "bloqueado_por_idempotencia", "dados": {}})
    orch, _ = build(model, mocked_aws["ledger"], invoker, MAX_RODADAS_POR_TURNO="20")
    conv = "conv-77f1"
    with capture_emf() as emf:
        reply = orch.handle(_turn(conv), Deadline.after(60))

    assert invoker.calls["emitir_reembolso"] == 4  # the 5th never reached the invoker
    assert len(model.requests) == 5  # 5 tool_use rounds; no model call after the refusal
    assert reply.resposta == HANDOFF
    assert reply.status == "aguardando_humano" and reply.motivo == "teto"

    state = mocked_aws["ledger"].read_conversation(conv)
    assert state.status is ConversationStatus.WAITING_HUMAN
    last = state.messages[-1]["content"][0]
    assert last["type"] == "tool_result" and last["is_error"] is True
    assert json.loads(last["content"])["erro"] == "bloqueado_por_teto"

    attempts = list(mocked_aws["ledger"].attempts(conv))
    assert [(a["tentativaNumero"], a["resultado"]) for a in attempts] == [
        (1, "bloqueado_por_idempotencia"), (2, "bloqueado_por_idempotencia"), (3, "bloqueado_por_idempotencia"),
        (4, "bloqueado_por_idempotencia"), (5, "bloqueado_por_teto")]
    audit = [json.loads(a["detalhes"]) | {"evento": a["evento"]}
             for a in mocked_aws["ledger"].history(conv, item_type=ItemType.AUDIT)]
    (refusal,) = [a for a in audit if a["evento"] == "TETO_DE_TENTATIVAS_ATINGIDO"]
    assert {k: refusal[k] for k in ("ferramenta", "assunto", "pedidoId", "tentativaNumero", "teto", "motivo")} == {
        "ferramenta": "emitir_reembolso", "assunto": "4821", "pedidoId": "4821", "tentativaNumero": 5, "teto": 4,
        "motivo": "teto"}  # the refusal and the hand-off it decided: one link
    assert not [a for a in audit if a["evento"] == "ENCAMINHADO_PARA_HUMANO"]

    totals = emf.totals()
    assert totals[("InterrupcoesPorTeto", (("Ferramenta", "emitir_reembolso"),))] == 1
    assert totals[("ChamadasPermitidas", (("Ferramenta", "emitir_reembolso"),))] == 4


def test_the_model_gets_the_refusal_as_an_is_error_tool_result(mocked_aws):
    """The refusal is the tool_result of the 5th tool_use in the conversation, so
    whenever the model is next consulted (here: after a human hands the
    conversation back) it sees why, and the ceiling still holds."""
    model = ScriptedModel(default=_insistent)
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker, MAX_RODADAS_POR_TURNO="20")
    orch.handle(_turn("conv-razao"), Deadline.after(60))
    for i in range(1, 5):  # rounds 2..5 carried results of allowed calls
        (result,) = model.tool_results(i)
        assert result["is_error"] is False
    mocked_aws["dynamodb"].update_item(  # an operator returns the conversation to the bot
        TableName="cadencia-agente-execucoes", Key={"pk": {"S": "conversa#conv-razao"}},
        UpdateExpression="SET #s = :a", ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":a": {"S": "ativa"}})
    model.then(text_reply("Um atendente vai revisar isso."))
    orch.handle(_turn("conv-razao", "alguma novidade?"), Deadline.after(60))
    sent = model.requests[5]["messages"]
    refusal = [b for m in sent if m["role"] == "user" for b in m["content"]
               if b.get("type") == "tool_result" and b["is_error"]]
    assert len(refusal) == 1
    assert json.loads(refusal[0]["content"])["erro"] == "bloqueado_por_teto"
    assert invoker.calls["emitir_reembolso"] == 4


def test_waiting_for_a_human_the_model_is_not_called_again(mocked_aws):
    model = ScriptedModel(default=_insistent)
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), MAX_RODADAS_POR_TURNO="20")
    orch.handle(_turn("conv-espera"), Deadline.after(60))
    calls_before = len(model.requests)
    reply = orch.handle(_turn("conv-espera", "e aí?"), Deadline.after(60))
    assert len(model.requests) == calls_before
    assert reply.status == "aguardando_humano" and reply.motivo == "aguardando_humano"


def test_real_tools_one_debit_then_idempotency_then_ceiling(local_stack, mocked_aws, gateway, erp, tools):
    """Through the in-process invoker and the real refund handler: 1 debit, 3
    idempotency blocks (no gateway call), the 5th refused by the ceiling."""
    invoker = CountingInvoker(InProcessInvoker({name: tools.environment(spec) for name, spec in TOOLS.items()}))
    model = ScriptedModel(default=_insistent)
    orch, _ = build(model, mocked_aws["ledger"], invoker, MAX_RODADAS_POR_TURNO="20")
    with capture_emf() as emf:
        reply = orch.handle(_turn("conv-real"), Deadline.after(60))
    assert reply.motivo == "teto"
    assert invoker.calls["emitir_reembolso"] == 4
    assert len(gateway.debits()) == 1 and gateway.stats()["reembolso"] == 1
    results = [a["resultado"] for a in mocked_aws["ledger"].attempts("conv-real")]
    assert results == ["executado"] + ["bloqueado_por_idempotencia"] * 3 + ["bloqueado_por_teto"]
    totals = emf.totals()
    assert totals[("ReembolsosReais", (("Ferramenta", "emitir_reembolso"),))] == 1
    assert totals[("BloqueiosPorIdempotencia", (("Ferramenta", "emitir_reembolso"),))] == 3


def test_three_orders_in_one_conversation_never_block_each_other(mocked_aws):
    orders = ["4821", "4822", "6200"]
    script = [tool_use("consultar_status_pedido", {"pedidoId": p}) for _ in range(4) for p in orders]
    model = ScriptedModel(*script, text_reply("Aqui estão os status."))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker, MAX_RODADAS_POR_TURNO="20")
    reply = orch.handle(_turn("conv-tres"), Deadline.after(60))
    assert reply.motivo == "resposta" and reply.status == "ativa"
    assert invoker.calls["consultar_status_pedido"] == 12  # 4 per order, none refused
    ceilings = [a for a in mocked_aws["ledger"].attempts("conv-tres")
                if a["resultado"] == "bloqueado_por_teto"]
    assert ceilings == []


def test_profile_updates_are_scoped_to_the_customer_record(mocked_aws):
    model = ScriptedModel(default=lambda _: tool_use("atualizar_cadastro", {"campos": {"email": "a@example.com"}}))
    invoker = CountingInvoker(answer={"ok": True, "resultado": "atualizado", "dados": {}})
    orch, _ = build(model, mocked_aws["ledger"], invoker, MAX_RODADAS_POR_TURNO="20")
    reply = orch.handle(_turn("conv-cad"), Deadline.after(60))
    assert invoker.calls["atualizar_cadastro"] == 4
    assert reply.resposta == ("Não consigo confirmar isso automaticamente depois de várias tentativas — "
                              "vou encaminhar para um atendente humano revisar o seu cadastro.")
    subjects = {a["assunto"] for a in mocked_aws["ledger"].attempts("conv-cad")}
    assert subjects == {"cliente-1001"}


def test_parallel_tool_calls_in_one_response_are_each_gated(mocked_aws):
    call = ("emitir_reembolso", {"pedidoId": "4821", "valor": 10})
    model = ScriptedModel(tool_uses(call, call, call), tool_uses(call, call, call))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    reply = orch.handle(_turn("conv-par"), Deadline.after(60))
    assert invoker.calls["emitir_reembolso"] == 4
    assert reply.motivo == "teto"
    results = model.requests[-1]["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [False, False, False]  # round 1 results sent in request 2


def test_fifty_racing_gate_decisions_allow_exactly_four(local_stack):
    """Against the local stack's moto server (requests serialized like DynamoDB)."""
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    ceiling = RetryCeiling(ledger, limit=4)
    conv = f"conv-race-{uuid.uuid4().hex[:6]}"
    call = ToolCall(spec=TOOLS["emitir_reembolso"], tool_use_id="t", arguments={"pedidoId": "4821", "valor": 1},
                    conversation_id=conv, customer_id=1001)
    barrier = threading.Barrier(50)
    decisions: list[tuple[int, bool]] = []
    lock = threading.Lock()

    def decide():
        barrier.wait()
        attempt = ceiling.decide(call)
        with lock:
            decisions.append((attempt.number, attempt.allowed))

    threads = [threading.Thread(target=decide) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(allowed for _, allowed in decisions) == 4
    assert sorted(n for n, _ in decisions) == list(range(1, 51))  # every attempt numbered once
    records = list(ledger.attempts(conv))  # the item keeps 4 allowed + REFUSALS_LISTED refused records
    assert [r["tentativaNumero"] for r in sorted(records, key=lambda r: r["tentativaNumero"])] == list(
        range(1, 4 + REFUSALS_LISTED + 1))
    assert [r["decisao"] for r in sorted(records, key=lambda r: r["tentativaNumero"])] == (
        ["permitida"] * 4 + ["bloqueada_por_teto"] * REFUSALS_LISTED)
    counter = ledger.table.get(counter_pk(conv, "4821", "emitir_reembolso"))
    assert counter["tentativas"] == 50 and counter["recusasNaoListadas"] == 50 - 4 - REFUSALS_LISTED


@pytest.mark.parametrize("teto", ["1", "2", "7"])
def test_the_ceiling_is_configurable(mocked_aws, teto):
    model = ScriptedModel(default=_insistent)
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker, TETO_TENTATIVAS=teto, MAX_RODADAS_POR_TURNO="20")
    orch.handle(_turn(f"conv-teto-{teto}"), Deadline.after(60))
    assert invoker.calls["emitir_reembolso"] == int(teto)

"""Every stop reason and every API error class has a defined behaviour, and
what is sent to the model (tools, injected identity, tool_result) is right."""

from __future__ import annotations

import itertools
import json
import uuid

import httpx2
import pytest

from cadencia_shared.ledger import ConversationStatus, ItemType
from orchestrator import money_sentences as ms
from orchestrator import texts
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.local_stack.emf import capture_emf

from .support.anthropic_fake import ScriptedModel, api_error, fixture, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build


def _turn(conv: str, text: str = "oi", cliente: int = 1001) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=cliente, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _state(mocked_aws, conv):
    return mocked_aws["ledger"].read_conversation(conv)


def _assert_history_valid(messages):
    """Alternating roles; every tool_use answered by a tool_result in the next message."""
    assert messages[0]["role"] == "user"
    for prev, nxt in itertools.pairwise(messages):
        assert prev["role"] != nxt["role"]
        uses = [b["id"] for b in prev["content"] if b.get("type") == "tool_use"]
        if uses:
            answered = [b["tool_use_id"] for b in nxt["content"] if b.get("type") == "tool_result"]
            assert answered == uses
    last_uses = [b for b in messages[-1]["content"] if b.get("type") == "tool_use"]
    assert last_uses == []


# -- what is sent ---------------------------------------------------------------------

def test_tools_are_strict_and_never_expose_identity(mocked_aws):
    model = ScriptedModel(text_reply("Olá!"))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.handle(_turn("conv-tools"), Deadline.after(60))
    sent = model.requests[0]
    assert [t["name"] for t in sent["tools"]] == ["consultar_status_pedido", "emitir_reembolso", "atualizar_cadastro",
                                                  "responder_cliente"]
    assert sent["tool_choice"] == {"type": "any"}  # the only way to finish is the checked final answer
    for tool in sent["tools"]:
        assert tool["strict"] is True
        schema = json.dumps(tool["input_schema"])
        assert "clienteId" not in schema and "conversaId" not in schema
        assert tool["input_schema"]["additionalProperties"] is False
    assert sent["model"] == "claude-sonnet-5-5"
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "oi"}]}]


def test_the_model_cannot_choose_the_customer(mocked_aws):
    """A clienteId in the model's input is rejected by the strict schema before
    any gate or tool; the tool always gets the inbound message's customer."""
    model = ScriptedModel(
        tool_use("consultar_status_pedido", {"pedidoId": "5100", "clienteId": 1002}),
        tool_use("consultar_status_pedido", {"pedidoId": "5100"}),
        text_reply("Não encontrei esse pedido."),
    )
    invoker = CountingInvoker(answer={"ok": False, "erro": {"codigo": "pedido_nao_encontrado", "mensagem": "x"}})
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    orch.handle(_turn("conv-ident", cliente=1001), Deadline.after(60))
    (rejected,) = model.tool_results(1)
    assert rejected["is_error"] is True
    body = json.loads(rejected["content"])
    assert body["erro"] == "entrada_invalida" and "clienteId" in " ".join(body["detalhes"])
    assert invoker.events == [("consultar_status_pedido", {"pedidoId": "5100", "conversaId": "conv-ident",
                                                           "clienteId": 1001})]
    (refused,) = model.tool_results(2)
    assert refused["is_error"] is True and json.loads(refused["content"])["erro"]["codigo"] == "pedido_nao_encontrado"


def test_unknown_tool_is_an_error_result_not_an_invocation(mocked_aws):
    model = ScriptedModel(tool_use("apagar_banco", {}), text_reply("Desculpe."))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    orch.handle(_turn("conv-unk"), Deadline.after(60))
    (result,) = model.tool_results(1)
    assert result["is_error"] is True and json.loads(result["content"])["erro"] == "ferramenta_desconhecida"
    assert sum(invoker.calls.values()) == 0


# -- stop reasons ---------------------------------------------------------------------

def test_end_turn_free_text_is_never_delivered(mocked_aws):
    """A model that ignores tool_choice and keeps answering in free text (here a
    false "refund done" of order 4821): each answer refused, then after K = 3 the
    fallback, rendered from the ledger: nothing was refunded for that order."""
    model = ScriptedModel(default=fixture("end_turn"))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn("conv-end"), Deadline.after(60))
    truth = ms.fallback([ms.Rendered(ms.REFUND_NOT_MADE, order="4821", why="nao_solicitado")])
    assert (reply.resposta, reply.status, reply.motivo) == (truth, "ativa", "contrato_de_saida")
    assert len(model.requests) == 3
    assert "sem_resposta_estruturada" in model.requests[1]["messages"][-1]["content"][-1]["text"]


def test_stop_sequence_text_is_corrected_into_a_final_answer(mocked_aws):
    model = ScriptedModel(fixture("stop_sequence"), text_reply("Posso ajudar em algo mais?"))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    assert orch.handle(_turn("conv-stop"), Deadline.after(60)).resposta == "Posso ajudar em algo mais?"
    assert len(model.requests) == 2


def test_tool_use_runs_the_tool_and_sends_the_result_back(mocked_aws):
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Consultei aqui."))
    invoker = CountingInvoker(answer={"ok": True, "resultado": "consultado", "dados": {"status": "entregue"}})
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    reply = orch.handle(_turn("conv-tool"), Deadline.after(60))
    assert reply.resposta == "Consultei aqui."
    (result,) = model.tool_results(1)
    assert result["is_error"] is False
    assert result["tool_use_id"] == model.requests[1]["messages"][-2]["content"][0]["id"]
    assert json.loads(result["content"])["dados"] == {"status": "entregue"}


def test_pause_turn_is_continued(mocked_aws):
    model = ScriptedModel(fixture("pause_turn"), text_reply("Posso ajudar em algo mais?"))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn("conv-pause"), Deadline.after(60))
    assert reply.resposta == "Posso ajudar em algo mais?"
    assert model.requests[1]["messages"][-1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Estou conferindo as informações"}]}


def test_max_tokens_never_executes_a_truncated_tool_call(mocked_aws):
    invoker = CountingInvoker()
    orch, _ = build(ScriptedModel(fixture("max_tokens")), mocked_aws["ledger"], invoker)
    reply = orch.handle(_turn("conv-max"), Deadline.after(60))
    assert sum(invoker.calls.values()) == 0
    assert (reply.resposta, reply.motivo) == (texts.TRUNCATED, "max_tokens")
    _assert_history_valid(_state(mocked_aws, "conv-max").messages)


def test_max_tokens_with_text_only_never_delivers_the_cut_off_text(mocked_aws):
    body = fixture("max_tokens")
    body["content"] = body["content"][:1]
    orch, _ = build(ScriptedModel(body), mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn("conv-max2"), Deadline.after(60))
    assert (reply.resposta, reply.motivo) == (texts.TRUNCATED, "max_tokens")


def test_refusal_hands_off_to_a_human(mocked_aws):
    orch, _ = build(ScriptedModel(fixture("refusal")), mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn("conv-ref"), Deadline.after(60))
    assert (reply.resposta, reply.status, reply.motivo) == (texts.REFUSAL, "aguardando_humano", "recusa_do_modelo")
    assert _state(mocked_aws, "conv-ref").status is ConversationStatus.WAITING_HUMAN


def test_context_window_exceeded_trims_once_then_hands_off(mocked_aws):
    model = ScriptedModel(text_reply("um"), text_reply("dois"))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.handle(_turn("conv-ctx", "primeira"), Deadline.after(60))
    orch.handle(_turn("conv-ctx", "segunda"), Deadline.after(60))

    model.then(fixture("context_window_exceeded"), text_reply("Resumindo: posso ajudar em algo mais?"))
    reply = orch.handle(_turn("conv-ctx", "terceira"), Deadline.after(60))
    assert reply.resposta == "Resumindo: posso ajudar em algo mais?"
    before, after = model.requests[-2]["messages"], model.requests[-1]["messages"]
    assert len(after) < len(before)  # trimmed before retrying, whole turns only
    assert after[0]["role"] == "user" and after[-1]["content"][-1]["text"] == "terceira"

    model.then(fixture("context_window_exceeded"), fixture("context_window_exceeded"))
    reply = orch.handle(_turn("conv-ctx", "quarta"), Deadline.after(60))
    assert (reply.resposta, reply.motivo) == (texts.CONTEXT_EXCEEDED, "janela_de_contexto")


def test_a_turn_that_alone_exceeds_the_window_is_kept_and_handed_off(mocked_aws):
    """Nothing older to drop: the current turn (and the tool it ran) is never erased."""
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}),
                          api_error("error_prompt_too_long", 400))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn("conv-sozinha", "cadê meu pedido?"), Deadline.after(60))
    assert (reply.resposta, reply.motivo) == (texts.CONTEXT_EXCEEDED, "janela_de_contexto")
    assert [len(r["messages"]) for r in model.requests] == [1, 3]  # never an empty request
    stored = _state(mocked_aws, "conv-sozinha").messages
    assert len(stored) == 3 and stored[0]["content"][0]["text"] == "cadê meu pedido?"
    _assert_history_valid(stored)


def test_trim_never_empties_and_never_orphans_a_tool_result():
    from orchestrator import history

    user = {"role": "user", "content": [{"type": "text", "text": "oi"}]}
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "{}"}]}
    merged = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "{}"},
                                          {"type": "text", "text": "e agora?"}]}
    assert history.trim([user, use, result], 1) == [user, use, result]  # one turn: kept whole
    assert history.trim([user, use, merged], 1) == [{"role": "user", "content": [{"type": "text",
                                                                                  "text": "e agora?"}]}]
    answer = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    assert history.trim([user, answer, user, answer], 2) == [user, answer]


def test_prompt_too_long_error_takes_the_context_path(mocked_aws):
    model = ScriptedModel(text_reply("antes"), api_error("error_prompt_too_long", 400), text_reply("Ok."))
    orch, sleeps = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.handle(_turn("conv-long", "primeira"), Deadline.after(60))
    assert orch.handle(_turn("conv-long", "segunda"), Deadline.after(60)).resposta == "Ok."
    assert sleeps == []  # not retried as if it were transient
    assert len(model.requests[2]["messages"]) < len(model.requests[1]["messages"])


def test_unknown_stop_reason_fails_cleanly(mocked_aws):
    body = text_reply("?")
    body["stop_reason"] = "something_new"
    orch, _ = build(ScriptedModel(body), mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn("conv-new"), Deadline.after(60))
    assert (reply.resposta, reply.motivo) == (texts.MODEL_UNAVAILABLE, "stop_reason_desconhecido")


def test_round_budget_exhausted_hands_off(mocked_aws):
    model = ScriptedModel(default=lambda _: tool_use("consultar_status_pedido", {"pedidoId": "4821"}))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), MAX_RODADAS_POR_TURNO="3", TETO_TENTATIVAS="10")
    reply = orch.handle(_turn("conv-rounds"), Deadline.after(60))
    assert (reply.resposta, reply.motivo) == (texts.ROUND_LIMIT, "limite_de_rodadas")
    assert len(model.requests) == 3
    _assert_history_valid(_state(mocked_aws, "conv-rounds").messages)


# -- API errors -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "error, classe",
    [
        (api_error("error_rate_limit", 429), "limite_de_taxa"),
        (api_error("error_overloaded", 529), "sobrecarga"),
        (api_error("error_api", 500), "erro_do_servidor"),
        (httpx2.ReadTimeout("timed out"), "tempo_esgotado"),
        (httpx2.ConnectError("refused"), "conexao"),
    ],
)
def test_retryable_errors_are_retried_then_succeed(mocked_aws, error, classe):
    model = ScriptedModel(error, error, text_reply("Olá de novo!"))
    orch, sleeps = build(model, mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn(f"conv-retry-{classe}"), Deadline.after(60))
    assert reply.resposta == "Olá de novo!"
    assert len(model.requests) == 3 and len(sleeps) == 2
    assert all(0 <= s <= 4.0 for s in sleeps)


@pytest.mark.parametrize("name, status, classe", [("error_overloaded", 529, "sobrecarga"),
                                                   ("error_rate_limit", 429, "limite_de_taxa"),
                                                   ("error_api", 500, "erro_do_servidor")])
def test_exhausted_retries_give_a_clean_failure_and_nothing_half_written(mocked_aws, name, status, classe):
    # The first round runs a tool; then the model stays unavailable.
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}),
                          default=api_error(name, status))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    with capture_emf() as emf:
        reply = orch.handle(_turn(f"conv-fail-{status}"), Deadline.after(60))
    assert (reply.resposta, reply.status, reply.motivo) == (texts.MODEL_UNAVAILABLE, "ativa", "modelo_indisponivel")
    assert len(model.requests) == 1 + 3  # MODEL_MAX_ATTEMPTS = 3
    assert emf.totals()[("ErrosDoModelo", (("Classe", classe),))] == 1
    messages = _state(mocked_aws, f"conv-fail-{status}").messages
    _assert_history_valid(messages)  # the executed tool has its result; no dangling tool_use
    assert messages[-1]["content"][0]["type"] == "tool_result"
    audit = [a["evento"] for a in mocked_aws["ledger"].history(f"conv-fail-{status}", item_type=ItemType.AUDIT)]
    assert "FALHA_DO_MODELO" in audit


def test_next_message_after_a_failure_continues_a_valid_history(mocked_aws):
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}),
                          *[api_error("error_overloaded", 529)] * 3, text_reply("Agora sim."))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.handle(_turn("conv-cont"), Deadline.after(60))
    assert orch.handle(_turn("conv-cont", "e então?"), Deadline.after(60)).resposta == "Agora sim."
    sent = model.requests[-1]["messages"]
    assert sent[-1]["role"] == "user"
    assert [b["type"] for b in sent[-1]["content"]] == ["tool_result", "text"]  # merged, valid


def test_authentication_error_is_not_retried(mocked_aws):
    model = ScriptedModel(api_error("error_authentication", 401))
    orch, sleeps = build(model, mocked_aws["ledger"], CountingInvoker())
    reply = orch.handle(_turn("conv-auth"), Deadline.after(60))
    assert reply.motivo == "modelo_indisponivel" and len(model.requests) == 1 and sleeps == []


def test_retry_after_is_honoured_only_up_to_the_cap(mocked_aws):
    model = ScriptedModel(api_error("error_rate_limit", 429, {"retry-after": "3600"}), text_reply("ok"))
    orch, sleeps = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.handle(_turn("conv-ra"), Deadline.after(60))
    assert sleeps == [4.0]


def test_no_retry_is_started_that_would_not_fit_the_deadline(mocked_aws):
    model = ScriptedModel(api_error("error_overloaded", 529, {"retry-after": "3"}), text_reply("ok"))
    orch, sleeps = build(model, mocked_aws["ledger"], CountingInvoker(), MODEL_BACKOFF_CAP_S="4")
    # 7 s left - 3 s reserve - 3 s wait leaves less than the 2 s minimum call.
    reply = orch.handle(_turn("conv-deadline"), Deadline.after(7.0))
    assert reply.motivo == "modelo_indisponivel"
    assert len(model.requests) == 1 and sleeps == []


def test_each_call_timeout_is_capped_by_the_remaining_time(mocked_aws):
    seen = []
    model = ScriptedModel(text_reply("ok"))
    original = model.handler

    def spy(request):
        seen.append(request.extensions.get("timeout"))
        return original(request)

    model.handler = spy
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), MODEL_TIMEOUT_S="25")
    orch.handle(_turn("conv-cap"), Deadline.after(10.0))
    read_timeout = seen[0]["read"]
    assert read_timeout <= 10.0 - 3.0 + 0.01  # remaining minus the commit reserve

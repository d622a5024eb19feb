"""One customer message, start to finish: the orchestrator's state machine.

    inbound ─► dedupe (ledger) ─► lease the conversation (version fence)
       │ duplicate: stored reply            │ waiting for a human: no model call
       ▼                                    ▼
    model round ──end_turn──► reply ─► commit (fenced) ─► mark the message answered
       │ tool_use: for each block: validate ─► retry ceiling ─► invoke ─► tool_result
       │           any call refused by the ceiling ─► hand off to a human (no more rounds)
       │ pause_turn ─► next round         max_tokens ─► never run a truncated tool call
       │ refusal ─► hand off              context window ─► trim once, then hand off
       │ model error (429/529/5xx/timeout) ─► bounded retry ─► clean failure message
       └ round budget exhausted ─► hand off

The model only ever *proposes*: every limit, every approval and what counts as
success is decided here, in code.

Protocol edges (the history must stay valid for the next request):
- a ``tool_use`` id already used (earlier in this response or anywhere in the
  conversation) is answered ``is_error`` and never executed. It does not count
  against the retry ceiling: no call was attempted, and the ceiling counts
  attempts at a subject (a repeated id names no new attempt; the round budget
  still bounds a model that keeps repeating).
- ``tool_use`` blocks in a response whose stop reason is not ``tool_use``
  (``end_turn``, ``stop_sequence``, ``pause_turn``) are never executed — the model
  did not stop to have them run — and each gets an ``is_error`` result. Under
  ``max_tokens``/``refusal``/context overflow such a response is not kept at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import (
    AttemptResult,
    ConversationBusy,
    ConversationOfAnotherCustomer,
    ConversationState,
    ConversationStatus,
    InboundStatus,
    Ledger,
    StaleConversation,
)
from cadencia_shared.observability import Metric, count, count_for_tool

from . import history, texts
from .events import TurnReply, TurnRequest
from .gates import RetryCeiling
from .invokers import InvocationStatus, ToolInvoker
from .model import ContextWindowExceeded, Deadline, ModelClient, ModelUnavailable
from .settings import OrchestratorSettings
from .tools import ToolCall, definitions, validation_errors

# A tool call is not started with less time left than this (the refund Lambda's
# timeout): a call cut short by our own deadline would be an unknown outcome.
TOOL_TIME_S = 8.0

_RESULT_BY_TOOL_ANSWER = {
    "executado": AttemptResult.EXECUTED,
    "consultado": AttemptResult.EXECUTED,
    "atualizado": AttemptResult.EXECUTED,
    "bloqueado_por_idempotencia": AttemptResult.BLOCKED_BY_IDEMPOTENCY,
    "em_processamento": AttemptResult.IN_PROGRESS_ELSEWHERE,
    "resultado_desconhecido": AttemptResult.OUTCOME_UNKNOWN,
    "recusado_pelo_gateway": AttemptResult.DECLINED_BY_GATEWAY,
}


class ConversationBusyError(Exception):
    """Another invocation is working on this conversation: retry later (the
    message was released for redelivery, nothing was done)."""


class ConcurrentCommitError(Exception):
    """Our lease was taken over before we committed: this invocation's reply is
    discarded and the message is released for redelivery."""


@dataclass
class _Outcome:
    messages: list[dict[str, Any]]
    status: ConversationStatus
    reply: str
    motivo: str


@dataclass
class _ToolRound:
    results: list[dict[str, Any]] = field(default_factory=list)
    refused_by_ceiling: list[ToolCall] = field(default_factory=list)
    out_of_time: bool = False


class Orchestrator:
    def __init__(
        self,
        *,
        settings: OrchestratorSettings,
        ledger: Ledger,
        model: ModelClient,
        invoker: ToolInvoker,
        logger: Logger | None = None,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.model = model
        self.invoker = invoker
        self.ceiling = RetryCeiling(ledger, settings.teto)
        self.tools = definitions(strict=settings.strict_tools)
        self.log = logger or Logger(service="orchestrator")

    # -- the turn ---------------------------------------------------------------
    def handle(self, req: TurnRequest, deadline: Deadline) -> TurnReply:
        # Leases outlive this invocation whatever the configuration says, so a live
        # turn never loses its message or its conversation to a redelivery.
        lease_s = max(self.settings.conversation_lease_s, int(deadline.remaining_s()) + 30)
        inbound = self.ledger.begin_inbound(conversa_id=req.conversaId, mensagem_id=req.mensagemId, lease_s=lease_s)
        if inbound.status is InboundStatus.DONE:
            return TurnReply.model_validate({**(inbound.resposta or {}), "duplicada": True})
        if inbound.status is InboundStatus.IN_PROGRESS:
            return self._reply(req, None, "em_processamento", "mensagem_em_processamento", duplicada=True)

        try:
            state = self.ledger.acquire_conversation(
                conversa_id=req.conversaId, cliente_id=req.clienteId, lease_s=lease_s
            )
        except ConversationOfAnotherCustomer:
            self.ledger.append_audit(conversa_id=req.conversaId, evento="CONVERSA_DE_OUTRO_CLIENTE",
                                     detalhes={"clienteId": req.clienteId})
            reply = self._reply(req, None, "erro", "conversa_de_outro_cliente")
            self.ledger.finish_inbound(inbound, resposta=reply.model_dump(mode="json"), ok=True)
            return reply
        except ConversationBusy:
            self.ledger.finish_inbound(inbound, resposta=None, ok=False)
            raise ConversationBusyError(req.conversaId) from None

        try:
            outcome = self._turn(req, state, deadline)
            reply = self._reply(req, outcome.reply, outcome.status.value, outcome.motivo)
            # The new state and "this message was answered" commit in one transaction.
            self.ledger.commit_conversation(state, mensagens=outcome.messages, status=outcome.status,
                                            inbound=inbound, resposta=reply.model_dump(mode="json"))
        except StaleConversation:
            self.ledger.append_audit(conversa_id=req.conversaId, evento="COMMIT_CONCORRENTE_REJEITADO",
                                     detalhes={"mensagemId": req.mensagemId, "versao": state.versao})
            self.ledger.finish_inbound(inbound, resposta=None, ok=False)
            raise ConcurrentCommitError(req.conversaId) from None
        except BaseException:
            self.ledger.release_conversation(state)
            self.ledger.finish_inbound(inbound, resposta=None, ok=False)
            raise
        return reply

    def _turn(self, req: TurnRequest, state: ConversationState, deadline: Deadline) -> _Outcome:
        messages = history.append_user_text(state.mensagens, req.mensagem)
        if state.status is ConversationStatus.WAITING_HUMAN:
            # A human owns the conversation now: the model is not consulted.
            return _Outcome(messages, ConversationStatus.WAITING_HUMAN, texts.WAITING_HUMAN, "aguardando_humano")
        messages = history.trim(messages, self.settings.history_max_messages)
        trimmed_for_context = False

        for _ in range(self.settings.max_rounds):
            try:
                response = self.model.create(
                    system=texts.SYSTEM_PROMPT, tools=self.tools, messages=messages, deadline=deadline,
                    reserve_s=self.settings.reserve_s,
                )
            except ContextWindowExceeded:
                shrunk = None if trimmed_for_context else self._shrink(messages)
                if shrunk is None:
                    return self._handoff(req, messages, texts.CONTEXT_EXCEEDED, "janela_de_contexto")
                messages, trimmed_for_context = shrunk, True
                continue
            except ModelUnavailable as err:
                count(Metric.MODEL_ERRORS, {"Classe": err.classe.value})
                self.ledger.append_audit(conversa_id=req.conversaId, evento="FALHA_DO_MODELO",
                                         detalhes={"classe": err.classe.value, "tentativas": err.attempts})
                return _Outcome(messages, ConversationStatus.ACTIVE, texts.MODEL_UNAVAILABLE, "modelo_indisponivel")

            content = [block.model_dump(mode="json", exclude_none=True) for block in response.content]
            stop = response.stop_reason
            if stop in ("end_turn", "stop_sequence"):
                if content:
                    self._keep_without_running(messages, content)
                return _Outcome(messages, ConversationStatus.ACTIVE, history.text_of(content) or texts.EMPTY_REPLY,
                                "resposta")
            if stop == "pause_turn":  # a long server-side step: send it back to continue
                self._keep_without_running(messages, content)
                continue
            if stop == "tool_use":
                seen = history.tool_use_ids(messages)
                messages.append({"role": "assistant", "content": content})
                done = self._run_tools(req, response.content, deadline, seen)
                messages.append({"role": "user", "content": done.results})
                if done.refused_by_ceiling:
                    first = done.refused_by_ceiling[0]
                    text = (texts.HANDOFF_CEILING_ORDER.format(pedidoId=first.pedido_id) if first.pedido_id
                            else texts.HANDOFF_CEILING_PROFILE)
                    return self._handoff(req, messages, text, "teto")
                if done.out_of_time:
                    # Not the customer's fault nor a reason for a human: answer, stay active.
                    return _Outcome(messages, ConversationStatus.ACTIVE, texts.OUT_OF_TIME, "sem_tempo")
                continue
            if stop == "max_tokens":
                # A tool call cut off mid-input is never executed; a cut-off text
                # answer is kept only when nothing else was asked.
                count(Metric.MODEL_ERRORS, {"Classe": "max_tokens"})
                texts_only = [b for b in content if b.get("type") == "text"]
                if texts_only and len(texts_only) == len(content):
                    messages.append({"role": "assistant", "content": texts_only})
                    return _Outcome(messages, ConversationStatus.ACTIVE, history.text_of(texts_only), "max_tokens")
                return _Outcome(messages, ConversationStatus.ACTIVE, texts.TRUNCATED, "max_tokens")
            if stop == "refusal":
                count(Metric.MODEL_ERRORS, {"Classe": "recusa"})
                return self._handoff(req, messages, texts.REFUSAL, "recusa_do_modelo")
            if stop == "model_context_window_exceeded":
                shrunk = None if trimmed_for_context else self._shrink(messages)
                if shrunk is None:
                    return self._handoff(req, messages, texts.CONTEXT_EXCEEDED, "janela_de_contexto")
                messages, trimmed_for_context = shrunk, True
                continue
            # A stop reason this code does not know: fail cleanly, never guess.
            count(Metric.MODEL_ERRORS, {"Classe": "stop_reason_desconhecido"})
            self.log.warning("unknown stop reason", extra={"stop_reason": stop})
            return _Outcome(messages, ConversationStatus.ACTIVE, texts.MODEL_UNAVAILABLE, "stop_reason_desconhecido")

        return self._handoff(req, messages, texts.ROUND_LIMIT, "limite_de_rodadas")

    @staticmethod
    def _shrink(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Half the history, whole turns only; None when nothing older can go."""
        shrunk = history.trim(messages, max(2, len(messages) // 2))
        return shrunk if len(shrunk) < len(messages) else None

    @staticmethod
    def _keep_without_running(messages: list[dict[str, Any]], content: list[dict[str, Any]]) -> None:
        messages.append({"role": "assistant", "content": content})
        unanswered = history.not_executed(content, _json({
            "erro": "chamada_nao_executada",
            "mensagem": "A resposta terminou sem pedir a execução de ferramentas; esta chamada não foi executada.",
        }))
        if unanswered:
            count(Metric.MODEL_ERRORS, {"Classe": "tool_use_sem_stop_reason"})
            messages.append({"role": "user", "content": unanswered})

    # -- tools ----------------------------------------------------------------------
    def _run_tools(self, req: TurnRequest, blocks: list[Any], deadline: Deadline, seen: set[str]) -> _ToolRound:
        done = _ToolRound()
        seen = set(seen)
        for block in blocks:
            if block.type != "tool_use":
                continue
            if block.id in seen:
                # Never executed, never counted by the ceiling (see module doc).
                count(Metric.MODEL_ERRORS, {"Classe": "tool_use_id_repetido"})
                done.results.append(history.tool_result(block.id, _json({
                    "erro": "id_repetido",
                    "mensagem": "Este id de chamada já foi usado nesta conversa; a chamada não foi executada.",
                }), is_error=True))
                continue
            seen.add(block.id)
            done.results.append(self._run_tool(req, block, deadline, done))
        return done

    def _run_tool(self, req: TurnRequest, block: Any, deadline: Deadline, done: _ToolRound) -> dict[str, Any]:
        spec = TOOLS.get(block.name)
        if spec is None:
            return history.tool_result(block.id, _json({"erro": "ferramenta_desconhecida", "ferramenta": block.name}),
                                       is_error=True)
        errors = validation_errors(spec.name, block.input)
        if errors:
            count_for_tool(Metric.TOOL_REFUSALS, spec.name)
            return history.tool_result(block.id, _json({"erro": "entrada_invalida", "detalhes": errors}), is_error=True)
        call = ToolCall(spec=spec, tool_use_id=block.id, arguments=dict(block.input),
                        conversa_id=req.conversaId, cliente_id=req.clienteId)
        if deadline.remaining_s() - self.settings.reserve_s < TOOL_TIME_S:
            done.out_of_time = True
            return history.tool_result(block.id, _json({"erro": "sem_tempo", "mensagem": "Ferramenta não executada."}),
                                       is_error=True)

        attempt = self.ceiling.decide(call)
        if not attempt.allowed:
            done.refused_by_ceiling.append(call)
            return history.tool_result(
                block.id,
                _json({
                    "erro": "bloqueado_por_teto",
                    "tentativaNumero": attempt.numero,
                    "teto": attempt.teto,
                    "mensagem": "Limite de tentativas atingido; um atendente humano vai revisar. Não tente novamente.",
                }),
                is_error=True,
            )

        invocation = self.invoker.invoke(spec, call.event())
        if not invocation.answered:
            count_for_tool(Metric.TOOL_ERRORS, spec.name)
            self.ledger.record_attempt_result(attempt, AttemptResult.TOOL_ERROR, invocation.status.value)
            return history.tool_result(
                block.id,
                _json({"erro": invocation.status.value,
                       "mensagem": "A ferramenta falhou; nada foi confirmado." + _timeout_hint(invocation.status)}),
                is_error=True,
            )
        payload = invocation.payload or {}
        if payload.get("ok"):
            result = _RESULT_BY_TOOL_ANSWER.get(payload.get("resultado", ""), AttemptResult.EXECUTED)
            detail = None
        else:
            result, detail = AttemptResult.REFUSED_BY_TOOL, (payload.get("erro") or {}).get("codigo")
        self.ledger.record_attempt_result(attempt, result, detail)
        return history.tool_result(block.id, _json(payload), is_error=not payload.get("ok"))

    # -- endings ----------------------------------------------------------------------
    def _handoff(self, req: TurnRequest, messages: list[dict[str, Any]], text: str, motivo: str) -> _Outcome:
        count(Metric.HUMAN_HANDOFFS, {"Motivo": motivo})
        self.ledger.append_audit(conversa_id=req.conversaId, evento="ENCAMINHADO_PARA_HUMANO",
                                 detalhes={"motivo": motivo, "mensagemId": req.mensagemId})
        return _Outcome(messages, ConversationStatus.WAITING_HUMAN, text, motivo)

    @staticmethod
    def _reply(req: TurnRequest, text: str | None, status: str, motivo: str, *, duplicada: bool = False) -> TurnReply:
        return TurnReply(conversaId=req.conversaId, mensagemId=req.mensagemId, resposta=text, status=status,
                         motivo=motivo, duplicada=duplicada)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _timeout_hint(status: InvocationStatus) -> str:
    if status is InvocationStatus.TIMEOUT:
        return " O resultado será conferido antes de qualquer nova tentativa."
    return ""

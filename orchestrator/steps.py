"""What to do next, decided in one place from the model's answer (as openai-agents'
``NextStep*`` types do in its run loop): reply, run the tools, hand off to a human,
shrink the context, or run the model again.

``next_step`` maps a response's stop reason to a step; ``step_for_model_error``
maps the model client's failures. Both are pure: they decide, the loop acts
(``loop.Orchestrator._apply``), and the tool round ends a turn with the same
``Reply``/``HandOff`` steps.

The customer reads only what passed the output contract (``output_contract``):
the model finishes by calling ``responder_cliente``, whose answer is checked
(schema, typed statements against the ledger, a free text that says nothing about
money, the record or an order's status) by the turn's ``ReplyCheck``; a violation
goes back to the model as an ``is_error`` result (``Correct``) until the check's
attempts run out, then the fallback rendered from the ledger.

Per stop reason:
    tool_use with responder_cliente ─► Reply / HandOff (valid) | Correct | Reply(fallback)
    tool_use                 ─► RunTools
    end_turn / stop_sequence ─► Correct (free text is never delivered) | Reply(fallback)
    pause_turn               ─► RunAgain (content kept, stray tool_use answered is_error)
    max_tokens               ─► Reply (truncation message; nothing cut off is run or delivered)
    refusal                  ─► HandOff
    model_context_window_exceeded (or a 400 "prompt too long") ─► ShrinkContext
    anything else            ─► Reply with a clean failure message (never guess)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import history, texts
from .model import ModelUnavailable
from .output_contract import NOT_ALONE, NOT_STRUCTURED, REPLY_TOOL, FinalAnswer, ReplyCheck, Violation, feedback

Content = list[dict[str, Any]]
Messages = tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Diagnosis:
    """What the loop records when a step ends a turn abnormally."""

    error_class: str  # ``Classe`` dimension of the model-errors metric
    audit: tuple[str, dict[str, Any]] | None = None  # (evento, detalhes) appended to the ledger
    warning: dict[str, Any] | None = None  # logged as "unknown stop reason" with these keys
    contract: tuple[str, ...] = ()  # output-contract outcomes counted (``Resultado``: violacao, fallback)


@dataclass(frozen=True)
class Reply:
    """End the turn with this text; the conversation stays with the agent."""

    text: str
    reason: str  # ``motivo`` on the wire
    diagnosis: Diagnosis | None = None
    limit: str | None = None  # the per-turn limit that ended the turn (budgets.Limit): audited, counted
    record: Messages = ()  # messages added to the history first (a final answer and its result)


@dataclass(frozen=True)
class HandOff:
    """End the turn and give the conversation to a human."""

    text: str
    reason: str
    diagnosis: Diagnosis | None = None
    limit: str | None = None  # as ``Reply.limit``
    record: Messages = ()  # as ``Reply.record``
    audited: bool = False  # the refusal that decided it already wrote one link with both facts


@dataclass(frozen=True)
class Correct:
    """A final answer broke the output contract: nothing reaches the customer; the
    messages (the answer and why it was refused) join the history and the model
    is asked again."""

    record: Messages
    diagnosis: Diagnosis


@dataclass(frozen=True)
class AwaitApproval:
    """End the turn; the conversation waits for a person's decision on a call
    its policy flags. The customer is told a person will check it; the model is not
    consulted again until the decision resumes the conversation."""

    text: str
    reason: str
    diagnosis: Diagnosis | None = None
    # A request created by this call (its event's detail); None when it already existed.
    request: dict[str, Any] | None = None
    limit: str | None = None  # as ``Reply.limit`` (never set by the gate; the loop reads it on every ending)


@dataclass(frozen=True)
class RunTools:
    content: Content  # the assistant message, as stored
    blocks: list[Any] = field(default_factory=list)  # the SDK's blocks, as the model sent them


@dataclass(frozen=True)
class RunAgain:
    keep: Content


@dataclass(frozen=True)
class ShrinkContext:
    pass


Ending = Reply | HandOff | AwaitApproval
Step = Reply | HandOff | AwaitApproval | RunTools | RunAgain | ShrinkContext | Correct


def next_step(response: Any, check: ReplyCheck) -> Step:
    content = [block.model_dump(mode="json", exclude_none=True) for block in response.content]
    stop = response.stop_reason
    if stop in ("end_turn", "stop_sequence"):
        return _free_text(content, check)
    if stop == "tool_use":
        if any(_is_final_answer(block) for block in content):
            return _final_answer(content, check)
        return RunTools(content, list(response.content))
    if stop == "pause_turn":  # a long server-side step: send it back to continue
        return RunAgain(content)
    if stop == "max_tokens":
        return _truncated(content)
    if stop == "refusal":
        return HandOff(texts.REFUSAL, "recusa_do_modelo", Diagnosis("recusa"))
    if stop == "model_context_window_exceeded":
        return ShrinkContext()
    return Reply(texts.MODEL_UNAVAILABLE, "stop_reason_desconhecido",
                 diagnosis=Diagnosis("stop_reason_desconhecido", warning={"stop_reason": stop}))


def _truncated(content: Content) -> Reply:
    """A tool call cut off mid-input is never executed, and a cut-off text never
    delivered (it did not pass the output contract): the truncation message."""
    return Reply(texts.TRUNCATED, "max_tokens", diagnosis=Diagnosis("max_tokens"))


def _is_final_answer(block: dict[str, Any]) -> bool:
    return block.get("type") == "tool_use" and block.get("name") == REPLY_TOOL


def _final_answer(content: Content, check: ReplyCheck) -> Step:
    """A ``responder_cliente`` call: delivered only when it is the response's only
    call and passes every check; its ``tool_result`` says what happened to it."""
    calls = [b for b in content if b.get("type") == "tool_use"]
    verdict = check.judge(calls[0]["input"]) if len(calls) == 1 else check.reject(NOT_ALONE)
    if isinstance(verdict, FinalAnswer):
        answered = history.tool_result(calls[0]["id"], "Resposta entregue ao cliente.", is_error=False)
        record = ({"role": "assistant", "content": content}, {"role": "user", "content": [answered]})
        if verdict.needs_person:
            return HandOff(verdict.delivered, "modelo_pediu_pessoa", record=record)
        return Reply(verdict.delivered, "resposta", record=record)
    refused = history.not_executed(content, feedback(verdict))
    return _rejected(({"role": "assistant", "content": content}, {"role": "user", "content": refused}),
                     verdict, check)


def _free_text(content: Content, check: ReplyCheck) -> Step:
    """Plain text at the end of a response is never delivered (with ``tool_choice:
    any`` it should not come at all): the model is told to use the final answer."""
    verdict = check.reject(NOT_STRUCTURED)
    check.note_orders({"texto": " ".join(str(b.get("text", "")) for b in content if b.get("type") == "text")})
    record: list[dict[str, Any]] = []
    user_blocks = history.not_executed(content, feedback(verdict))
    if content:
        record.append({"role": "assistant", "content": content})
    user_blocks.append({"type": "text", "text": feedback(verdict)})
    record.append({"role": "user", "content": user_blocks})
    return _rejected(tuple(record), verdict, check)


def _rejected(record: Messages, violations: list[Violation], check: ReplyCheck) -> Correct | Reply:
    details = {"tentativa": check.attempts, "maxTentativas": check.max_attempts,
               "violacoes": sorted({v.code for v in violations})}
    if not check.exhausted:
        return Correct(record, Diagnosis("contrato_de_saida", audit=("CONTRATO_DE_SAIDA_VIOLADO", details),
                                         contract=("violacao",)))
    diagnosis = Diagnosis("contrato_de_saida", audit=("CONTRATO_DE_SAIDA_FALLBACK", details),
                          contract=("violacao", "fallback"))
    # Rendered from the ledger and this conversation's tool results: true, whatever the model said.
    return Reply(check.fallback(), "contrato_de_saida", diagnosis=diagnosis, record=record)


def step_for_model_error(err: ModelUnavailable) -> Reply:
    error_class = err.error_class.value
    audit = ("FALHA_DO_MODELO", {"classe": error_class, "tentativas": err.attempts, "erro": err.sdk_error})
    return Reply(texts.MODEL_UNAVAILABLE, "modelo_indisponivel", diagnosis=Diagnosis(error_class, audit=audit))

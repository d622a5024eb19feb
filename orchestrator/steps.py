"""What to do next, decided in one place from the model's answer (as openai-agents'
``NextStep*`` types do in its run loop): reply, run the tools, hand off to a human,
shrink the context, or run the model again.

``next_step`` maps a response's stop reason to a step; ``step_for_model_error``
maps the model client's failures. Both are pure: they decide, the loop acts
(``loop.Orchestrator._apply``), and the tool round ends a turn with the same
``Reply``/``HandOff`` steps.

Per stop reason:
    end_turn / stop_sequence ─► Reply (text; stray tool_use answered is_error)
    tool_use                 ─► RunTools
    pause_turn               ─► RunAgain (content kept, stray tool_use answered is_error)
    max_tokens               ─► Reply (a text-only answer kept; a cut-off tool call never run)
    refusal                  ─► HandOff
    model_context_window_exceeded (or a 400 "prompt too long") ─► ShrinkContext
    anything else            ─► Reply with a clean failure message (never guess)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import history, texts
from .model import ModelUnavailable

Content = list[dict[str, Any]]


@dataclass(frozen=True)
class Diagnosis:
    """What the loop records when a step ends a turn abnormally."""

    error_class: str  # ``Classe`` dimension of the model-errors metric
    audit: tuple[str, dict[str, Any]] | None = None  # (evento, detalhes) appended to the ledger
    warning: dict[str, Any] | None = None  # logged as "unknown stop reason" with these keys


@dataclass(frozen=True)
class Reply:
    """End the turn with this text; the conversation stays with the agent."""

    text: str
    reason: str  # ``motivo`` on the wire
    keep: Content | None = None  # assistant content added to the history first
    diagnosis: Diagnosis | None = None
    limit: str | None = None  # the per-turn limit that ended the turn (budgets.Limit): audited, counted


@dataclass(frozen=True)
class HandOff:
    """End the turn and give the conversation to a human."""

    text: str
    reason: str
    diagnosis: Diagnosis | None = None
    limit: str | None = None  # as ``Reply.limit``


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


Ending = Reply | HandOff
Step = Reply | HandOff | RunTools | RunAgain | ShrinkContext


def next_step(response: Any) -> Step:
    content = [block.model_dump(mode="json", exclude_none=True) for block in response.content]
    stop = response.stop_reason
    if stop in ("end_turn", "stop_sequence"):
        return Reply(history.text_of(content) or texts.EMPTY_REPLY, "resposta", keep=content or None)
    if stop == "tool_use":
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
    """A tool call cut off mid-input is never executed; a cut-off text answer is
    kept only when nothing else was asked."""
    diagnosis = Diagnosis("max_tokens")
    texts_only = [b for b in content if b.get("type") == "text"]
    if texts_only and len(texts_only) == len(content):
        return Reply(history.text_of(texts_only), "max_tokens", keep=texts_only, diagnosis=diagnosis)
    return Reply(texts.TRUNCATED, "max_tokens", diagnosis=diagnosis)


def step_for_model_error(err: ModelUnavailable) -> Reply:
    error_class = err.error_class.value
    audit = ("FALHA_DO_MODELO", {"classe": error_class, "tentativas": err.attempts})
    return Reply(texts.MODEL_UNAVAILABLE, "modelo_indisponivel", diagnosis=Diagnosis(error_class, audit=audit))

"""Per-turn limits: model calls, tool calls, tokens, the deadline and the
operator's cancellation. Each one that ends a turn does so with its own ``motivo``,
a customer message, an audit record (``TURNO_INTERROMPIDO``) and a metric
(``TurnosInterrompidos{Motivo}``) — recorded once, by the loop's ``_end``, from the
ending's ``limit``.

Where each is checked:
- model calls, tokens, deadline: before every model call (``TurnBudget.before_model_call``);
  the model-call budget is the round budget (``MAX_RODADAS_POR_TURNO``: one
  request per round; the model client's own retries of that request are bounded
  separately by ``MODEL_MAX_ATTEMPTS``);
- tool calls, tokens, cost and the deadline: before every tool call (the ``CallTimeBudget``,
  ``TokenBudget`` and ``ToolCallBudget`` controls, first in the chain): a response that
  spends the token or the cost budget gets none of the tools it asked for run;
- the conversation's model cost (``ORCAMENTO_CUSTO_USD_POR_CONVERSA``): what the earlier
  turns committed (the conversation item's ``custoModeloMicroUsd``) plus this turn's,
  from each response's ``usage`` at the configured prices (orchestrator.usage), checked
  with the tokens;
- cancellation: before every tool call that can change something (``Cancellation``;
  a read-only tool changes nothing and is not checked) and, atomically, in the
  commit's transaction (``Ledger.commit_conversation``'s fence), so it wins over a
  retry and over a tool result that arrives after the operator's command.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from . import texts
from .steps import Ending, HandOff, Reply
from .usage import count

if TYPE_CHECKING:
    from .model import Deadline


class Limit(StrEnum):
    """The ``motivo`` of a turn a limit ended (wire names)."""

    MODEL_CALLS = "limite_de_rodadas"  # Lab 87's round budget: one model request per round
    TOOL_CALLS = "orcamento_de_ferramentas"
    TOKENS = "orcamento_de_tokens"
    COST = "orcamento_de_custo"  # the conversation's model dollars (ORCAMENTO_CUSTO_USD_POR_CONVERSA)
    DEADLINE = "sem_tempo"
    CANCELLED = "cancelada"


def ending_for(limit: Limit) -> Ending:
    """How a turn a limit stopped ends for the customer. Running out of time is
    nobody's fault: the agent answers and stays. A spent budget means the agent was
    going round in circles, and a cancellation means an operator stepped in: a
    person takes over."""
    if limit is Limit.DEADLINE:
        return Reply(texts.OUT_OF_TIME, limit.value, limit=limit.value)
    text = texts.CANCELLED if limit is Limit.CANCELLED else texts.ROUND_LIMIT
    return HandOff(text, limit.value, limit=limit.value)


@dataclass
class TurnBudget:
    """What one turn may still spend; counted by the loop (model calls, ``usage``)
    and by the ``ToolCallBudget`` control (tool calls)."""

    max_model_calls: int
    max_tool_calls: int
    max_tokens: int
    reserve_s: float
    min_model_call_s: float
    model_calls: int = 0
    tool_calls: int = 0
    tokens: int = 0
    # The conversation's model cost: what earlier turns committed, and this turn's.
    max_cost_usd: float = float("inf")
    cost_before_usd: float = 0.0
    cost_usd: float = 0.0

    def cost_spent(self) -> bool:
        return self.cost_before_usd + self.cost_usd >= self.max_cost_usd

    def before_model_call(self, deadline: Deadline) -> Ending | None:
        """None: the model may be asked (and the call is counted); else the ending."""
        if self.model_calls >= self.max_model_calls:
            return ending_for(Limit.MODEL_CALLS)
        if self.tokens >= self.max_tokens:
            return ending_for(Limit.TOKENS)
        if self.cost_spent():
            return ending_for(Limit.COST)
        if deadline.remaining_s() - self.reserve_s < self.min_model_call_s:
            return ending_for(Limit.DEADLINE)
        self.model_calls += 1
        return None

    def add_usage(self, usage: Any) -> None:
        """Tokens billed for one response: input (cached or not) and output."""
        if usage is None:
            return
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            self.tokens += count(usage, name)  # never negative, NaN or unbounded (orchestrator.usage)

    def figures(self) -> dict[str, int | float]:
        """For the audit record of an interrupted turn (counts only, no content)."""
        return {"chamadasModelo": self.model_calls, "chamadasFerramenta": self.tool_calls, "tokens": self.tokens,
                "custoUsd": round(self.cost_before_usd + self.cost_usd, 6)}

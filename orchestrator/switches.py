"""The tool kill switch control: an operator stopped this tool fleet-wide.

After the cancellation check, before the circuit breaker (DESIGN's chain): a
stopped tool's call is neither a breaker probe nor a counted attempt, and it is
refused before any invocation. One strongly consistent GetItem of
``interruptor#{tool}`` per call (``cadencia_shared.ledger.switches``), no cache: a
switch takes effect on the next call of every instance. Fails closed — an item
whose ``estado`` is not exactly ``ligada`` stops the tool; a read that fails
raises (the turn fails and is retried), it never lets the call through.

The refusal is typed (``ferramenta_desligada``), linked once on the
conversation's audit chain (``BLOQUEADO_POR_INTERRUPTOR``), counted
(``RecusasPorInterruptor{Ferramenta}``), and goes back to the model: the turn does
not end here, because another call of the same response may have run (a refund
beside a stopped profile tool), and a fixed "nothing was done" would then be false.
What the customer reads about money comes, as always, from the verified statements
(``reembolso_nao_feito`` / ``recusado_pela_ferramenta``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from cadencia_shared.ledger import AuditTrail, SwitchReader
from cadencia_shared.observability import Metric, count_for_tool

from .controls import CallContext, CallOutcome, Refusal

SWITCH_EVENT = "BLOQUEADO_POR_INTERRUPTOR"


class SwitchRefusal(StrEnum):
    STOPPED = "ferramenta_desligada"


class SwitchLedger(SwitchReader, AuditTrail, Protocol):
    """What the control needs of the ledger: the switch read and the audit trail."""


class ToolSwitches:
    def __init__(self, ledger: SwitchLedger) -> None:
        self.ledger = ledger

    def before(self, ctx: CallContext) -> Refusal | None:
        tool = ctx.call.spec.name
        if self.ledger.tool_switch(tool).running:
            return None
        count_for_tool(Metric.SWITCH_REFUSALS, tool)
        self.ledger.append_audit(conversation_id=ctx.call.conversation_id, event=SWITCH_EVENT,
                                 details={"ferramenta": tool, "mensagemId": ctx.message_id})
        return Refusal(
            SwitchRefusal.STOPPED,
            {"mensagem": "Ferramenta desligada por um operador; não foi executada. Não tente novamente."},
        )

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        return None

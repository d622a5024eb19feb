"""The gate every tool call passes before it is invoked: the retry ceiling.

One conditional write per decision (``Ledger.register_attempt``: an atomic
counter) — never a Query followed by a decision, which races: two concurrent
calls could both count 3 and both proceed. With the counter, 50 racing calls
for one key get the numbers 1..50 and exactly ``teto`` are allowed.
"""

from __future__ import annotations

from cadencia_shared.ledger import Attempt, Ledger
from cadencia_shared.observability import Metric, count_for_tool

from .tools import ToolCall


class RetryCeiling:
    def __init__(self, ledger: Ledger, teto: int) -> None:
        self.ledger = ledger
        self.teto = teto

    def decide(self, call: ToolCall) -> Attempt:
        attempt = self.ledger.register_attempt(
            conversa_id=call.conversa_id,
            assunto=call.subject,
            ferramenta=call.spec.name,
            teto=self.teto,
            pedido_id=call.pedido_id,
            chave_idempotencia=call.idempotency_key,
        )
        if attempt.allowed:
            count_for_tool(Metric.CALLS_ALLOWED, call.spec.name)
            return attempt
        # Refused before the tool Lambda is invoked: the 5th call never gets near
        # the tool's credentials.
        count_for_tool(Metric.CEILING_INTERRUPTIONS, call.spec.name)
        self.ledger.append_audit(
            conversa_id=call.conversa_id,
            evento="TETO_DE_TENTATIVAS_ATINGIDO",
            detalhes={"ferramenta": call.spec.name, "assunto": call.subject, "pedidoId": call.pedido_id,
                      "tentativaNumero": attempt.numero, "teto": self.teto},
        )
        return attempt

"""Every ``resultado`` value, once: what a tool answered and what an attempt record keeps.

These are wire and stored names (Lab 87's ``executado``, ``bloqueado_por_idempotencia``,
``bloqueado_por_teto`` first), so the strings never change; the Python names are English.
The orchestrator uses this enum. ``ledger.AttemptResult`` and the tools' own constants
are older spellings of the same strings, kept working until they switch to this enum;
``tests/test_outcomes.py`` keeps them equal meanwhile.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    # What a tool answers in ``resultado`` when ``ok`` is true.
    EXECUTED = "executado"  # the refund was debited (and the attempt that ran any tool successfully)
    CONSULTED = "consultado"  # the order status was read
    UPDATED = "atualizado"  # the customer record was changed
    BLOCKED_BY_IDEMPOTENCY = "bloqueado_por_idempotencia"  # the refund key was already final: nothing sent
    IN_PROGRESS_ELSEWHERE = "em_processamento"  # a concurrent call holds the refund claim
    OUTCOME_UNKNOWN = "resultado_desconhecido"  # the gateway did not answer; reconciled before any retry
    DECLINED_BY_GATEWAY = "recusado_pelo_gateway"
    # Only in attempt records (the orchestrator's view of a call).
    BLOCKED_BY_CEILING = "bloqueado_por_teto"
    PENDING = "pendente"  # allowed, the tool has not answered yet
    REFUSED_BY_TOOL = "recusado_pela_ferramenta"  # typed business error (unknown order, bad amount...)
    TOOL_ERROR = "erro_da_ferramenta"  # the tool crashed, timed out or was throttled

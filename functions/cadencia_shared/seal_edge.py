"""The tool edge's ledger reads: SEAL's check (docs/seal.md) — every tool Lambda verifies
the call's envelope before the event is parsed into its logic — and the tool's kill switch.

``check(tool, event)`` answers ``None`` (the call is authorized: its ``jti`` is now
used) or the typed refusal the tool answers — nothing changed, nothing read but the
session (and, for a refund above the limit, the approval it names). The verifier is
built once per execution environment from ``LEDGER_TABLE`` and the AWS settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from .aws import AwsSettings, client
from .ledger import Ledger
from .results import ErrorCode, ToolError
from .seal import ENVELOPE_FIELD, ApprovalCheck, SealRefusal, Verifier
from .settings import LedgerSettings

# How a tool's edge checks an approval an envelope names: the refund's handler wires
# ``seal_approvals.ledger_approvals``; a tool without an approval policy, ``no_approvals``.
Approvals = Callable[[Ledger], ApprovalCheck]

REFUSAL_MESSAGE = "Chamada recusada: não foi autorizada por este atendimento (selo)."


STOPPED_MESSAGE = "Ferramenta desligada por um operador; não foi executada. Não tente novamente."


@cache
def _ledger_for(aws: AwsSettings, ledger: LedgerSettings) -> Ledger:
    return Ledger(ledger.table_name, client("dynamodb", aws))


@cache
def verifier_for(aws: AwsSettings, ledger: LedgerSettings, approvals: Approvals) -> Verifier:
    table = _ledger_for(aws, ledger)
    return Verifier(table.table, approvals(table))


def stopped(tool: str) -> ToolError | None:
    """The kill switch read again at the tool itself (one strongly consistent GetItem): a
    supervisor's stop that lands after the orchestrator's own read still runs nothing. Fails
    closed like the orchestrator's control (``cadencia_shared.ledger.switches``)."""
    if _ledger_for(AwsSettings.from_env(), LedgerSettings.from_env()).tool_switch(tool).running:
        return None
    return ToolError(ErrorCode.TOOL_STOPPED, STOPPED_MESSAGE)


def verify(tool: str, event: Mapping[str, Any], approvals: Approvals) -> SealRefusal | None:
    return verifier_for(AwsSettings.from_env(), LedgerSettings.from_env(), approvals).verify(tool, event)


def refusal_error(refusal: SealRefusal) -> ToolError:
    """What the tool answers: the numeric code only (the model and the audit learn why
    by number; nothing of the event is echoed)."""
    return ToolError(ErrorCode.SEAL_REFUSED, REFUSAL_MESSAGE, details={"codigo": int(refusal.code)})


def without_envelope(event: Mapping[str, Any]) -> dict[str, Any]:
    """The verified event as the tool's model reads it: the envelope is the edge's, never
    an argument of the tool."""
    return {k: v for k, v in event.items() if k != ENVELOPE_FIELD}


def reset_verifiers() -> None:
    """Forget cached clients (tests switch between mocked and local AWS)."""
    verifier_for.cache_clear()
    _ledger_for.cache_clear()

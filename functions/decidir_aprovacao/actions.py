"""The two changes a person makes through the decision function, shared by its JSON API
(``api.py``, ``switches_api.py``) and its pages (``console.py``): one copy of each.

``decide`` applies ``cadencia_shared.approval_policy`` (group, two people above the
second amount, no approving after one's own denial, cancelled or handed-off refused),
audits the decision or the refusal with the person, and resumes the conversation when
the decision is final. ``switch`` replaces a tool's kill switch and audits it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from cadencia_shared import approval_policy
from cadencia_shared.approvals import DecisionRefused
from cadencia_shared.identity import Person
from cadencia_shared.ledger import Ledger, SwitchState, ToolSwitch
from cadencia_shared.models import EDGE_CONFIG, Justification

SWITCH_CHANGED_EVENT = "INTERRUPTOR_ALTERADO"


class ApiDecision(BaseModel):
    """A decision's body: the JSON API's and the page's form (read into the same model)."""

    model_config = EDGE_CONFIG

    decisao: Literal["aprovar", "negar"]
    justificativa: Justification
    valorAprovado: str | None = None  # reais as text ("150.00"): a lower amount than asked


class Refused(Exception):
    """A decision the policy refused (nothing decided); ``code`` is its wire name."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def decide(ledger: Ledger, approval: str, *, who: Person, approve: bool, justification: str,
           amount_text: str | None, policy: approval_policy.PolicySettings,
           resume: Callable[[str], None]) -> approval_policy.Decided:
    """One person's decision; raises ``Refused`` (audited; nothing decided)."""
    try:
        amount = approval_policy.parse_amount(amount_text) if amount_text is not None else None
        decided = approval_policy.decide(ledger, approval, person=who, approve=approve,
                                         justification=justification, approved_amount=amount, settings=policy)
    except DecisionRefused as refused:
        ledger.append_audit(conversation_id=refused.record.conversation_id if refused.record else None,
                            event="DECISAO_DE_APROVACAO_RECUSADA",
                            details={"aprovacaoId": approval, "motivo": refused.reason, **who.audit()})
        if refused.reason == "aprovacao_expirada":
            resume(approval)  # a late decision unsticks the conversation: it is closed and told
        raise Refused(refused.reason) from None
    record = decided.record
    ledger.append_audit(conversation_id=record.conversation_id, event="APROVACAO_DECIDIDA",
                        details={"aprovacaoId": record.id, "status": record.status.value,
                                 "resultado": decided.outcome, "argumentosSha256": record.arguments_sha256,
                                 **({"substituiu": decided.replaced} if decided.replaced else {}),
                                 **who.audit()})
    if decided.outcome != approval_policy.AWAITING_SECOND:
        resume(record.id)
    return decided


def switch(ledger: Ledger, tool: str, *, who: Person, state: str, reason: str) -> tuple[ToolSwitch, ToolSwitch]:
    """Stop or restart ``tool`` (a registry tool; the caller checked) for everyone; audited."""
    before = ledger.tool_switch(tool)
    after = ledger.set_switch(tool, SwitchState(state), subject=who.subject, name=who.name, reason=reason)
    details: dict[str, Any] = {"ferramenta": tool, "estado": after.state.value, "estadoAnterior": before.state.value,
                               "motivo": after.reason, "alteradoEm": after.at, **who.audit()}
    ledger.append_audit(conversation_id=None, event=SWITCH_CHANGED_EVENT, details=details)
    return before, after

"""A person's decision on an approval request: its own ledger item, which only the
decision role writes (docs/decisions/decision-records.md).

``aprovacao#{id}`` is the request and its lifecycle (the orchestrators create it, consume,
void and expire it; its ``status`` is what the console and the CLI show). Its ``aprovada``
cannot by itself authorise money: the orchestrators can write that item. The decision is

    decisao#{id}            one per request, written once (PutItem attribute_not_exists):
                            aprovada or negada, the people who decided (for an amount that
                            needs two: both, distinct), how many the policy required, and
                            the request's conversation, tool, version, arguments digest and
                            expiry, copied when it was decided
    decisao#{id}#primeira   the first of two people's approval, while the second is awaited

No other role has any write action on ``decisao#`` (``infra/ledger_kinds.py``); the
orchestrators and the refund's edge only read it. Whether an approval may run a call is
``approval_use.usability``, which requires this record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .ledger import TABLE_KEY, TTL_ATTRIBUTE, ItemType, Ledger, decision_pk
from .ledger.table import condition_failed

APPROVED, DENIED, FIRST = "aprovada", "negada", "primeira"
RETENTION_S = 90 * 24 * 3600  # as the request's (approvals.RETENTION_S)


@dataclass(frozen=True)
class Binding:
    """What a decision is about: the request's bound fields, copied when it is decided."""

    approval_id: str
    conversation_id: str
    tool: str
    tool_version: str
    arguments_sha256: str
    expires_at_ms: int


@dataclass(frozen=True)
class DecisionRecord:
    binding: Binding
    decision: str  # aprovada, negada, or primeira (a first of two people's approval)
    approvers: tuple[str, ...]  # the people's subjects, in the order they decided
    required: int  # how many distinct people the policy required when it was decided
    decided_at: str

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> DecisionRecord | None:
        """None when the item is not a well-formed decision (it authorises nothing)."""
        try:
            binding = Binding(item["aprovacaoId"], item["conversaId"], item["ferramenta"], item["versaoFerramenta"],
                              item["argumentosSha256"], int(item["expiraEmMs"]))
            approvers = tuple(item["aprovadores"])
            required = int(item["aprovadoresExigidos"])
            decision = item["decisao"]
        except (KeyError, TypeError, ValueError):
            return None
        if not all(isinstance(v, str) and v for v in (*approvers, *_texts(binding), decision)):
            return None
        return cls(binding, decision, approvers, required, str(item.get("decididoEm", "")))

    def approves(self, binding: Binding, now_ms: int) -> bool:
        """Approved, for exactly this request's binding, unexpired, by as many distinct
        people as the policy required (at least one)."""
        return (self.decision == APPROVED and self.binding == binding and now_ms < self.binding.expires_at_ms
                and self.required >= 1 and len(set(self.approvers)) >= self.required)


def _texts(binding: Binding) -> tuple[str, ...]:
    return (binding.approval_id, binding.conversation_id, binding.tool, binding.tool_version,
            binding.arguments_sha256)


def read(ledger: Ledger, approval: str, *, first: bool = False) -> DecisionRecord | None:
    try:
        item = ledger.table.get(decision_pk(approval, first=first))
    except ValueError:  # not an identifier a key may hold
        return None
    return DecisionRecord.from_item(item) if item else None


def write(ledger: Ledger, binding: Binding, *, decision: str, approvers: tuple[str, ...],
          required: int) -> DecisionRecord:
    """Record a decision once. Returns the record that stands: this one, or the one
    already there (the caller compares: another person's, or this person's own retry)."""
    record = DecisionRecord(binding, decision, approvers, required, ledger.table.iso(ledger.now_ms()))
    item = {TABLE_KEY: decision_pk(binding.approval_id, first=decision == FIRST), "tipo": ItemType.DECISION.value,
            "aprovacaoId": binding.approval_id, "conversaId": binding.conversation_id, "ferramenta": binding.tool,
            "versaoFerramenta": binding.tool_version, "argumentosSha256": binding.arguments_sha256,
            "expiraEmMs": binding.expires_at_ms, "decisao": decision, "aprovadores": list(approvers),
            "aprovadoresExigidos": required, "decididoEm": record.decided_at,
            TTL_ATTRIBUTE: binding.expires_at_ms // 1000 + RETENTION_S}
    try:
        ledger.table.put_new(item)
    except ClientError as err:
        if not condition_failed(err):
            raise
        standing = read(ledger, binding.approval_id, first=decision == FIRST)
        if standing is None:  # there, but not a decision: nothing this call can stand on
            raise
        return standing
    return record


def first_approver(ledger: Ledger, approval: str) -> str | None:
    """The subject of the first of two people, when one approved and the second is awaited."""
    first = read(ledger, approval, first=True)
    return first.approvers[0] if first is not None and first.decision == FIRST and first.approvers else None

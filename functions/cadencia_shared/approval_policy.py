"""The rules a person cannot talk around when deciding an approval.

    the person is in the ``aprovadores`` group (checked here, by code)  ─ else grupo_nao_autorizado
    a person who denied this request cannot approve it                  ─ aprovador_ja_negou
    the conversation cancelled or with an attendant                     ─ (ApprovalStore.decide refuses)
    an approved amount above the asked one                              ─ valor_acima_do_pedido
    an approved amount below it ─► a NEW request bound to the new arguments (same conversation,
        tool, version and attempt number), decided by this person, and the original closed
        (``anulada``, audited as replaced): the call that runs, and the sentence the customer
        reads, are the new arguments'
    amount above ``APROVACAO_DUPLA_ACIMA_REAIS`` (default R$ 2.000): two distinct people
        first approver ─► ``decisao#{id}#primeira`` (``approval_decisions``: one PutItem, only when
                           none is there), and ``primeiraAprovacao`` on the pending request for
                           display ─► still pending
        the same person again ─► still pending (aguardando_segundo_aprovador), nothing changed
        another person ─► ApprovalStore.decide (pendente → aprovada), its decision record naming
                           both people and requiring two

The first approval is never removed, so a second person who reads it and then decides cannot
be overtaken by an un-approval; it is read from the decision role's own item (the request's
``primeiraAprovacao`` is the orchestrators' to write too, and decides nothing). A denial by
anyone, first or second, closes the request (negada); its decision record makes a later
approval by anyone impossible (one decision per request).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from botocore.exceptions import ClientError
from pydantic import Field

from . import approval_decisions
from .approvals import (
    REPLACED_BY_ATTRIBUTE,
    REPLACES_ATTRIBUTE,
    ApprovalRecord,
    ApprovalStatus,
    ApprovalStore,
    DecisionRefused,
)
from .catalog import TOOLS
from .identity import APPROVERS, Person
from .ledger import ConversationStatus, Ledger, approval_pk
from .ledger.table import condition_failed, serialize
from .settings import EnvSettings

FIRST_APPROVAL = "primeiraAprovacao"
REPLACES = REPLACES_ATTRIBUTE
REPLACED_BY = REPLACED_BY_ATTRIBUTE
AMOUNT_PATTERN = re.compile(r"\A(0|[1-9][0-9]{0,9})(\.[0-9]{1,2})?\Z")
AWAITING_SECOND = "aguardando_segundo_aprovador"


class PolicySettings(EnvSettings):
    # Above this amount (R$) an approval needs two distinct people.
    two_person_above: Decimal = Field(Decimal("2000.00"), alias="APROVACAO_DUPLA_ACIMA_REAIS", ge=0,
                                      max_digits=12, decimal_places=2)


@dataclass(frozen=True)
class Decided:
    record: ApprovalRecord  # the record as it stands now (the new one when a lower amount was approved)
    outcome: str  # aprovada, negada, aguardando_segundo_aprovador
    replaced: str | None = None  # the original request, when a lower amount replaced it


def parse_amount(text: object) -> Decimal:
    """An approved amount on the wire: a string of reais with at most two decimals."""
    if not isinstance(text, str) or not AMOUNT_PATTERN.match(text):
        raise DecisionRefused("valor_invalido")
    amount = Decimal(text)
    if amount <= 0:
        raise DecisionRefused("valor_invalido")
    return amount


def decide(ledger: Ledger, approval: str, *, person: Person, approve: bool, justification: str,
           approved_amount: Decimal | None, settings: PolicySettings) -> Decided:
    """One person's decision under the policy. Raises ``DecisionRefused`` (nothing changed)."""
    if APPROVERS not in person.groups:
        raise DecisionRefused("grupo_nao_autorizado")
    store = ApprovalStore(ledger)
    record = store.get(approval)
    if record is None:
        raise DecisionRefused("aprovacao_inexistente")
    if approve and _denied_by(ledger, record, person):
        raise DecisionRefused("aprovador_ja_negou", record)
    if record.status is not ApprovalStatus.PENDING or not record.intact:
        # The store words why (decided, voided, expired, invalid); nothing is written.
        return Decided(_store_decide(store, record, person, approve, justification), "")
    if not approve:
        return Decided(_store_decide(store, record, person, False, justification), ApprovalStatus.DENIED.value)
    if approved_amount is None or record.amount is None or approved_amount == record.amount:
        return _approve_closing(ledger, store, record, person, justification, settings)
    if approved_amount > record.amount:
        raise DecisionRefused("valor_acima_do_pedido", record)
    return _approve_lower(ledger, store, record, approved_amount, person, justification, settings)


def _denied_by(ledger: Ledger, record: ApprovalRecord, person: Person) -> bool:
    """This person already denied this request (its decision record, or the request's own status)."""
    decision = approval_decisions.read(ledger, record.id)
    if decision is not None and decision.decision == approval_decisions.DENIED and person.subject in decision.approvers:
        return True
    return record.status is ApprovalStatus.DENIED and record.decided_by == person.subject


def _approve_lower(ledger: Ledger, store: ApprovalStore, record: ApprovalRecord, amount: Decimal, person: Person,
                   justification: str, settings: PolicySettings) -> Decided:
    _require_waiting(ledger, record)
    lower = _lower_request(store, record, amount, ledger.now_ms())
    # The new request names the one it replaces: whoever approves it last (this person, or
    # the second person when the new amount still needs two) closes the original.
    ledger.client.update_item(TableName=ledger.table_name, Key=ledger.table.key(approval_pk(lower.id)),
                              UpdateExpression=f"SET {REPLACES} = :original",
                              ConditionExpression="attribute_exists(pk)",
                              ExpressionAttributeValues=serialize({":original": record.id}))
    if lower.status is ApprovalStatus.APPROVED and lower.decided_by == person.subject:
        # This person's same decision again, after a crash before the original was closed:
        # finish it (close the original; the caller resumes, which is repeatable).
        return _closing(ledger, store, lower, person, Decided(lower, ApprovalStatus.APPROVED.value))
    return _approve_closing(ledger, store, lower, person, justification, settings)


def _approve_closing(ledger: Ledger, store: ApprovalStore, record: ApprovalRecord, person: Person,
                     justification: str, settings: PolicySettings) -> Decided:
    return _closing(ledger, store, record, person, _approve(ledger, store, record, person, justification, settings))


def _closing(ledger: Ledger, store: ApprovalStore, record: ApprovalRecord, person: Person,
             decided: Decided) -> Decided:
    replaced = _field(ledger, record.id, REPLACES) if decided.outcome == ApprovalStatus.APPROVED.value else None
    original = store.get(replaced) if isinstance(replaced, str) else None
    if original is None:
        return decided
    _close_replaced(ledger, store, original, decided.record, person)
    return Decided(decided.record, decided.outcome, replaced=original.id)


def _approve(ledger: Ledger, store: ApprovalStore, record: ApprovalRecord, person: Person, justification: str,
             settings: PolicySettings) -> Decided:
    if record.amount is None or record.amount <= settings.two_person_above:
        return Decided(_store_decide(store, record, person, True, justification), ApprovalStatus.APPROVED.value)
    first = _first_approver(ledger, record.id)
    if first is None:
        _require_waiting(ledger, record)
        if _write_first(ledger, record, person):
            return Decided(store.get(record.id) or record, AWAITING_SECOND)
        first = _first_approver(ledger, record.id)  # another person's landed first
        if first is None:  # not pending any more: the store says why
            return Decided(_store_decide(store, record, person, True, justification), "")
    if first == person.subject:
        return Decided(record, AWAITING_SECOND)
    return Decided(_store_decide(store, record, person, True, justification, first=first),
                   ApprovalStatus.APPROVED.value)


def _store_decide(store: ApprovalStore, record: ApprovalRecord, person: Person, approve: bool,
                  justification: str, *, first: str | None = None) -> ApprovalRecord:
    # The person's group was checked above: the store's allowlist is this one person.
    # An approval after a first person's: the decision record names both and requires two.
    return store.decide(record.id, approve=approve, approver=person.subject, justification=justification,
                        allowed_approvers=frozenset({person.subject}),
                        co_approvers=(first,) if approve and first else (), required=2 if approve and first else 1)


def _require_waiting(ledger: Ledger, record: ApprovalRecord) -> None:
    """What ApprovalStore.decide checks, before this module writes anything of its own."""
    if ledger.cancellation_pending(record.conversation_id):
        raise DecisionRefused("conversa_cancelada", record)
    state = ledger.read_conversation(record.conversation_id)
    if state is not None and state.status is ConversationStatus.WAITING_HUMAN:
        raise DecisionRefused("conversa_com_atendente", record)
    if state is None or state.status is not ConversationStatus.WAITING_APPROVAL:
        raise DecisionRefused("conversa_nao_aguarda_aprovacao", record)
    if record.expired(ledger.now_ms()):
        raise DecisionRefused("aprovacao_expirada", record)


def _field(ledger: Ledger, approval: str, name: str) -> object:
    return (ledger.table.get(approval_pk(approval)) or {}).get(name)


def _first_approver(ledger: Ledger, approval: str) -> str | None:
    return approval_decisions.first_approver(ledger, approval)


def _write_first(ledger: Ledger, record: ApprovalRecord, person: Person) -> bool:
    binding = approval_decisions.Binding(record.id, record.conversation_id, record.tool, record.tool_version,
                                         record.arguments_sha256, record.expires_at_ms)
    first = approval_decisions.write(ledger, binding, decision=approval_decisions.FIRST,
                                     approvers=(person.subject,), required=2)
    if first.approvers != (person.subject,):
        return False  # another person's landed first
    now = ledger.now_ms()
    try:
        ledger.client.update_item(
            TableName=ledger.table_name, Key=ledger.table.key(approval_pk(record.id)),
            UpdateExpression=f"SET {FIRST_APPROVAL} = :primeira",
            ConditionExpression=f"attribute_exists(pk) AND attribute_not_exists({FIRST_APPROVAL}) "
                                f"AND #st = :pendente AND expiraEmMs > :agora_ms AND {record.unchanged_condition()}",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues=serialize({
                ":primeira": {"sub": person.subject, "nome": person.name, "em": ledger.table.iso(now)},
                ":pendente": ApprovalStatus.PENDING.value, ":agora_ms": now, **record.stored_fields()}),
        )
    except ClientError as err:
        if not condition_failed(err):
            raise
        # A display copy is there already (a retry, or one the orchestrators wrote: it decides
        # nothing), or the request moved on since it was read.
        fresh = ApprovalStore(ledger).get(record.id)
        if fresh is None or fresh.status is not ApprovalStatus.PENDING or fresh.expired(ledger.now_ms()):
            raise DecisionRefused(_moved_on(fresh), fresh) from None
    ledger.append_audit(conversation_id=record.conversation_id, event="APROVACAO_PRIMEIRA_PESSOA",
                        details={"aprovacaoId": record.id, **person.audit()})
    return True


def _moved_on(record: ApprovalRecord | None) -> str:
    if record is not None and record.status is ApprovalStatus.VOIDED:
        return "aprovacao_anulada"
    if record is not None and record.status is not ApprovalStatus.PENDING:
        return "aprovacao_ja_decidida"
    return "aprovacao_expirada"


def _lower_request(store: ApprovalStore, record: ApprovalRecord, amount: Decimal, now_ms: int) -> ApprovalRecord:
    policy = TOOLS[record.tool].approval
    assert policy is not None  # a record with an amount has an amount field
    arguments = {**record.arguments, policy.amount_field: amount}
    validity_s = max(60, (record.expires_at_ms - now_ms) // 1000)
    lower, _ = store.request(tool=record.tool, version=record.tool_version, arguments=arguments,
                             conversation_id=record.conversation_id, customer_id=record.customer_id,
                             amount=amount, reason="valor_reduzido_pelo_aprovador", validity_s=validity_s,
                             attempt_number=record.attempt_number)
    return lower


def _close_replaced(ledger: Ledger, store: ApprovalStore, original: ApprovalRecord, lower: ApprovalRecord,
                    person: Person) -> None:
    """The original closes only while still undecided. Decided meanwhile (another person
    approved or denied it from a fresher read, or the conversation was cancelled), the lower
    request this decision made is voided instead and the decision refused: a decision on a
    stale read never overrides another's, and two approvals never wait side by side."""
    before = store.close(original.id, conversation_id=original.conversation_id, status=ApprovalStatus.VOIDED,
                         only_pending=True, replaced_by=lower.id)
    if before is None and _field(ledger, original.id, REPLACED_BY) == lower.id:
        return  # this very replacement already closed it (the same decision sent twice)
    if before is None:
        store.close(lower.id, conversation_id=lower.conversation_id, status=ApprovalStatus.VOIDED)
        ledger.append_audit(conversation_id=original.conversation_id, event="APROVACAO_VALOR_MENOR_DESCARTADA",
                            details={"aprovacaoId": original.id, "novaAprovacaoId": lower.id,
                                     "motivo": "pedido_original_ja_decidido", **person.audit()})
        raise DecisionRefused(_moved_on(store.get(original.id)), store.get(original.id))
    ledger.append_audit(conversation_id=original.conversation_id, event="APROVACAO_SUBSTITUIDA_POR_VALOR_MENOR",
                        details={"aprovacaoId": original.id, "novaAprovacaoId": lower.id,
                                 "statusAnterior": before.value if before else None,
                                 "valorPedido": _reais(original.amount), "valorAprovado": _reais(lower.amount),
                                 **person.audit()})


def _reais(amount: Decimal | None) -> str | None:
    return None if amount is None else format(amount.quantize(Decimal("0.01")), "f")

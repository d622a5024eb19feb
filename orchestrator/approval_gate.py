"""The confirmation gate: an irreversible call its policy flags runs
only with a person's approval bound to exactly that call.

Placed after the retry ceiling and feasibility: a call the ceiling refuses, or
one the tool itself would refuse (``feasibility.py``: not this customer's order,
above the balance), never asks anyone; every call that runs — an approved one
included — was counted.

    policy says no approval needed ─────────────────────────────► pass
    needed, no approver configured ─► refuse, hand off (never executes)
    needed ─► the approval for (conversation, tool, version, SHA-256 of the canonical arguments):
        another call of this round already waits ─► is_error, not asked (one per round)
        none / voided / expired unused ─► a new request (its own record and id) ─► the
                                 conversation waits (AwaitApproval)
        pendente              ─► still waiting
        negada                ─► is_error with the approver's reason; the customer is told
        aprovada              ─► its decision record approves it (``approval_use``; else unusable)
                              ─► consume it (one conditional write) ─► pass
        consumida             ─► pass (the same call again: the refund's idempotency key
                                 answers it, so no second debit can follow)

Whether an order was already refunded is read twice. A claim of this conversation
answers only when its key answers the call for ever (executed, declined, or an
outcome the gateway still holds: ``ANSWERED_BY_ITS_KEY``); a released claim proves
nothing, so the order is read as for any other conversation. The ERP's own figure
(``valorReembolsado``, through the status tool, which the orchestrator may already
invoke: no new privilege) knows refunds made in other conversations or outside the
agent; the ledger cannot (a refund claim is keyed by conversation and order); the
read is feasibility's, kept in the call's context (``feasibility.order_read``). But
two conversations asking at once both read "nothing refunded" there, so every
refund call first takes the ledger's conditional mark of the order's first
refunder (``Ledger.first_refund_conversation``): the loser's refund is a second
refund. The mark stays even when the first refund never happened (conservative:
a person is asked). When the ERP's figure cannot be read the gate assumes a prior
refund (fail closed).
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Any

from cadencia_shared import approval_use
from cadencia_shared.approval_arguments import canonical_arguments
from cadencia_shared.approvals import ApprovalRecord, ApprovalStatus, ApprovalStore
from cadencia_shared.catalog import ApprovalPolicy
from cadencia_shared.ledger import ClaimStatus, Ledger
from cadencia_shared.settings import ApprovalSettings

from . import texts
from .controls import CallContext, CallOutcome, Refusal, RetryCeiling
from .feasibility import order_read, own_claim
from .invokers import ToolInvoker
from .steps import AwaitApproval, HandOff, Reply
from .tools import ToolCall, canonical_input, tool_version

# A claim of this conversation in one of these states can never be released (the
# refund's transition table has no way from them to ``falhou_antes_do_gateway``), so
# the tool answers a repeat of its key from the claim (the original outcome, or the
# claim's own request re-sent) and never takes a new amount. Any other claim — a
# released one, or one still ``em_processamento``/``envio_possivel``, which may yet
# be released and retaken — says nothing about whether the order was refunded.
ANSWERED_BY_ITS_KEY = frozenset({ClaimStatus.EXECUTED, ClaimStatus.DECLINED, ClaimStatus.UNKNOWN,
                                 ClaimStatus.RECONCILING})


class ApprovalRefusal(StrEnum):
    """The ``erro`` the model reads when the gate stops a call (wire names)."""

    AWAITING = "aguardando_aprovacao"
    DENIED = "aprovacao_negada"
    NO_APPROVER = "aprovacao_sem_aprovador"
    UNUSABLE = "aprovacao_inutilizavel"  # expired, or not bound to this exact call
    # Another call of the same model response already waits for a person: this one is
    # neither run nor asked (docs/decisions/one-approval-per-tool-round.md).
    ONE_AT_A_TIME = "aprovacao_uma_por_vez"


class Why(StrEnum):
    """Why a call needs approval (``motivo`` of the request)."""

    ABOVE_THRESHOLD = "acima_do_limite"
    SECOND_REFUND = "segundo_reembolso"
    PRIOR_REFUNDS_UNKNOWN = "reembolsos_anteriores_desconhecidos"


class ConfirmationGate:
    def __init__(self, ledger: Ledger, invoker: ToolInvoker, settings: ApprovalSettings, *, reserve_s: float) -> None:
        self.ledger = ledger
        self.store = ApprovalStore(ledger)
        self.invoker = invoker
        self.settings = settings
        self.reserve_s = reserve_s

    # -- the policy -------------------------------------------------------------
    def why_approval(self, call: ToolCall, policy: ApprovalPolicy, ctx: CallContext) -> Why | None:
        # Prior refunds first: every refund call marks its conversation as the order's
        # first refunder (race-free), also when the amount alone needs approval.
        prior = self._prior_refund(call, ctx) if policy.second_refund else False
        amount = Decimal(str(call.arguments[policy.amount_field]))
        threshold = policy.default_threshold if self.settings.threshold is None else self.settings.threshold
        if amount > threshold:
            return Why.ABOVE_THRESHOLD
        if prior is None:
            return Why.PRIOR_REFUNDS_UNKNOWN
        return Why.SECOND_REFUND if prior else None

    def _prior_refund(self, call: ToolCall, ctx: CallContext) -> bool | None:
        """True: the order was refunded, or another conversation asked first; None: unknown."""
        claim = own_claim(ctx, self.ledger)
        if claim is not None and claim.status in ANSWERED_BY_ITS_KEY:
            # This conversation's own refund of this order, asked again: its
            # idempotency key answers it for ever, no new money can move.
            return False
        # No claim, or one that proves nothing about the order (released, or still
        # able to be released and retaken with a new amount): the order decides.
        # Two conversations asking at once both read "nothing refunded" from the ERP;
        # the ledger's conditional mark makes one of them the second.
        owner = self.ledger.first_refund_conversation(order_id=str(call.order_id), conversation_id=call.conversation_id)
        if owner != call.conversation_id:
            return True
        read = order_read(ctx, self.invoker, self.reserve_s)  # feasibility's read, when it made one
        if read is None or not read.found:
            return None  # unreadable (or gone since feasibility read it): fail closed
        return read.refunded > 0

    # -- the control ------------------------------------------------------------
    def before(self, ctx: CallContext) -> Refusal | None:
        call = ctx.call
        policy = call.spec.approval
        if policy is None:
            return None
        why = self.why_approval(call, policy, ctx)
        if why is None:
            return None
        if not self.settings.approvers:
            self._audit(call, "APROVACAO_SEM_APROVADOR", {"motivo": why.value})
            return Refusal(ApprovalRefusal.NO_APPROVER,
                           {"mensagem": "Esta chamada exige aprovação humana e não há aprovador; não foi executada. "
                                        "Não tente novamente."},
                           ending=HandOff(texts.NO_APPROVER, "aprovacao_sem_aprovador"))
        # One request per round: the conversation waits on ONE decision, and its resume
        # runs that one call; a second request of the same response would be stranded.
        asked = (call.spec.name, canonical_arguments(canonical_input(call.spec.name, call.arguments))[1])
        waiting_on = ctx.round_notes.get(ConfirmationGate)
        if waiting_on is not None and waiting_on != asked:
            self._audit(call, "APROVACAO_NAO_SOLICITADA", {"motivo": ApprovalRefusal.ONE_AT_A_TIME.value})
            return Refusal(ApprovalRefusal.ONE_AT_A_TIME,
                           {"mensagem": "Outra chamada desta resposta já aguarda a aprovação de uma pessoa. "
                                        "Esta NÃO foi executada nem enviada para aprovação; peça de novo depois "
                                        "da decisão."})
        attempt = ctx.notes.get(RetryCeiling)  # kept on the request: its resume runs under it
        refusal = self._with_approval(call, policy, why, None if attempt is None else attempt.number)
        if refusal is not None and refusal.reason is ApprovalRefusal.AWAITING:
            ctx.round_notes[ConfirmationGate] = asked
        return refusal

    def _with_approval(self, call: ToolCall, policy: ApprovalPolicy, why: Why,
                       attempt_number: int | None) -> Refusal | None:
        version = tool_version(call.spec.name, self.settings.release)
        arguments = canonical_input(call.spec.name, call.arguments)
        digest = canonical_arguments(arguments)[1]
        record, created = self.store.request(
            tool=call.spec.name, version=version, arguments=arguments, conversation_id=call.conversation_id,
            customer_id=call.customer_id, amount=Decimal(str(arguments[policy.amount_field])), reason=why.value,
            validity_s=self.settings.validity_s, attempt_number=attempt_number,
        )
        bound = record.binds(conversation_id=call.conversation_id, tool=call.spec.name, version=version,
                             arguments_sha256=digest)
        if bound and self._usable(record):
            return None
        if record.status is ApprovalStatus.DENIED:
            return self._denied(call, record)
        if record.status is ApprovalStatus.PENDING and bound and not record.expired(self.ledger.now_ms()):
            if created:
                self._audit_record(record, "APROVACAO_SOLICITADA")
            return self._awaiting(record, created)
        # Consumed or approved but expired, or a record that does not bind this
        # call: never executes; a person takes over.
        self._audit(call, "APROVACAO_INVALIDA", {"aprovacaoId": record.id, "status": record.status.value,
                                                  "vinculada": bound})
        return Refusal(ApprovalRefusal.UNUSABLE, {"mensagem": "Aprovação expirada ou que não confere; não executada."},
                       ending=HandOff(texts.APPROVAL_UNUSABLE, "aprovacao_inutilizavel"))

    def _usable(self, record: ApprovalRecord) -> bool:
        # The request's status alone authorises nothing: the decision record must approve
        # exactly this request (approval_use), before it is consumed and after.
        if record.expired(self.ledger.now_ms()) or not approval_use.usable(self.ledger, record):
            return False
        if record.status is ApprovalStatus.APPROVED:
            if self.store.consume(record):
                self._audit_record(record, "APROVACAO_CONSUMIDA")
                return True
            fresh = self.store.get(record.id)  # lost the race: consumed by the winner?
            return fresh is not None and fresh.status is ApprovalStatus.CONSUMED
        return record.status is ApprovalStatus.CONSUMED

    @staticmethod
    def _awaiting(record: ApprovalRecord, created: bool) -> Refusal:
        request = {"aprovacaoId": record.id, "ferramenta": record.tool, "motivo": record.reason,
                   "pedidoId": record.arguments.get("pedidoId"), "valor": format(record.amount, "f"),
                   "expiraEmMs": record.expires_at_ms} if created else None
        return Refusal(ApprovalRefusal.AWAITING,
                       {"aprovacaoId": record.id,
                        "mensagem": "Esta chamada aguarda a aprovação de uma pessoa e NÃO foi executada. "
                                    "Não tente novamente: a conversa continua quando houver uma decisão."},
                       ending=AwaitApproval(texts.AWAITING_APPROVAL.format(order_id=record.arguments.get("pedidoId")),
                                            "aguardando_aprovacao", request=request))

    def _denied(self, call: ToolCall, record: ApprovalRecord) -> Refusal:
        return Refusal(ApprovalRefusal.DENIED,
                       {"aprovacaoId": record.id, "motivo": record.justification,
                        "mensagem": "A aprovação foi negada; a chamada não foi executada. Não tente novamente."},
                       ending=Reply(texts.APPROVAL_DENIED.format(order_id=call.order_id), "aprovacao_negada"))

    def _audit(self, call: ToolCall, event: str, details: dict[str, Any]) -> None:
        self.ledger.append_audit(conversation_id=call.conversation_id, event=event,
                                 details={"ferramenta": call.spec.name, "pedidoId": call.order_id, **details})

    def _audit_record(self, record: ApprovalRecord, event: str) -> None:
        self.ledger.append_audit(conversation_id=record.conversation_id, event=event, details={
            "aprovacaoId": record.id, "ferramenta": record.tool, "versaoFerramenta": record.tool_version,
            "argumentosSha256": record.arguments_sha256, "valor": str(record.amount), "motivo": record.reason,
            "status": record.status.value})

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        return None


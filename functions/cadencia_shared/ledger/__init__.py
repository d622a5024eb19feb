"""The ledger: one DynamoDB table, and the only package that knows its keys.

Every item kind the agent writes lives here, with its key format and the single
conditional write that makes each decision race-free. The orchestrator, the tool
Lambdas and the scripts all go through it, so no key is spelled in two places.

Table ``cadencia-agente-execucoes`` (partition key ``pk``; GSI ``historicoPorConversa``
on ``conversaId`` + ``registradoEm``, keys and ``tipo`` only, for one conversation's history; sparse GSI
``pendenciasPorVisita`` on ``pendencia`` + ``visitadoEm``, keys only, for the work lists).

=====================  ===========================================  =================  ==================
tipo                   pk (built by ``table.<function>``)           module             decided by
=====================  ===========================================  =================  ==================
reivindicacao          ``reivindicacao#{chaveIdempotencia}``        ``claims``         PutItem
                       (``claim_pk``)                                                  attribute_not_exists
primeiro_reembolso     ``primeiro-reembolso#{pedido}``              ``claims``         PutItem (or the same
                       (``first_refund_pk``)                                           conversation)
contador_tentativas    ``contador#{conversa}#{assunto}#{tool}``     ``attempts``       UpdateItem ADD +
                       (``counter_pk``); attempt n is                                  list_append (number
                       ``registros[n-1]``                                              and record at once)
conversa               ``conversa#{conversa}`` (``conversation_pk``) ``conversations`` UpdateItem, version
                                                                                       fence, no pending
                                                                                       cancellation; also
                                                                                       each inbound message's
                                                                                       dedupe (``inbound``)
auditoria              ``auditoria#{uuid}`` (``audit_pk``)          ``audit``          PutItem
                                                                                       attribute_not_exists
aprovacao              ``aprovacao#{approval_id(...)}``             ``cadencia_shared  PutItem; conditional
                       (``approval_pk``)                            .approvals``       UpdateItem on status
decisao                ``decisao#{aprovacaoId}`` (``decision_pk``;  ``cadencia_shared  PutItem
                       ``…#primeira``: a first of two people)       .approval_         attribute_not_exists
                                                                    decisions``        (decision role only)
sessao                 ``sessao#{id}`` (``session_pk``): one turn's ``sessions``        PutItem (orchestrator);
                       signing key's public half and limits                            UpdateItem closes it
interruptor            ``interruptor#{ferramenta}`` (``switch_pk``) ``switches``       PutItem (latest word
                                                                                       wins; malformed = stopped)
=====================  ===========================================  =================  ==================

``chaveIdempotencia`` keeps Lab 87's format ``{conversaId}#{pedidoId}#reembolso``
(``refund_idempotency_key``). ``envio#{wamid}`` (the WhatsApp reply outbox) is owned
by ``canal_whatsapp.outbox``. Every name importable from this package before it was
split stays importable from here. ``sessions`` is not re-exported: it imports
``cryptography``, which only the functions that sign or verify carry.
"""

from .attempts import ATTEMPT_EVENT, Attempt, AttemptRecorder, AttemptResult, AttemptStore
from .audit import AuditChain, AuditStore, AuditTrail
from .claims import (
    DETAIL_MAX,
    FINAL_CLAIM_STATUSES,
    SETTLED_CLAIM_STATUSES,
    ClaimLost,
    ClaimStatus,
    ClaimStore,
    ClaimTaken,
    RefundClaim,
    RefundClaims,
    clip_detail,
)
from .conversations import (
    CANCELLATION_ATTRIBUTE,
    CancellationPending,
    ConversationBusy,
    ConversationCancellation,
    ConversationOfAnotherCustomer,
    Conversations,
    ConversationState,
    ConversationStatus,
    ConversationStore,
    EncodedHistory,
    StaleConversation,
)
from .facade import Ledger
from .inbound import INBOUND_TTL_S, REPLIES_KEPT, MessageAnswered, MessageInProgress
from .switches import SwitchReader, SwitchState, SwitchStore, ToolSwitch, switch_pk
from .table import (
    APPROVAL_APPROVED_MARK,
    APPROVAL_PENDING_MARK,
    GSI_BY_CONVERSATION,
    GSI_PARTITION,
    GSI_SORT,
    GSI_UNSETTLED,
    GSI_UNSETTLED_PARTITION,
    GSI_UNSETTLED_SORT,
    HUMAN_PENDING_MARK,
    LEGACY_GSI_BY_CONVERSATION,
    LEGACY_GSI_UNSETTLED,
    RETIRED_INDEXES,
    TABLE_KEY,
    TTL_ATTRIBUTE,
    UNSETTLED_MARK,
    ItemType,
    LedgerError,
    LedgerTable,
    approval_id,
    approval_pk,
    decision_pk,
    refund_idempotency_key,
    require_retired_indexes,
    table_definition,
)

__all__ = [
    "APPROVAL_APPROVED_MARK",
    "APPROVAL_PENDING_MARK",
    "ATTEMPT_EVENT",
    "CANCELLATION_ATTRIBUTE",
    "DETAIL_MAX",
    "FINAL_CLAIM_STATUSES",
    "GSI_BY_CONVERSATION",
    "GSI_PARTITION",
    "GSI_SORT",
    "GSI_UNSETTLED",
    "GSI_UNSETTLED_PARTITION",
    "GSI_UNSETTLED_SORT",
    "HUMAN_PENDING_MARK",
    "INBOUND_TTL_S",
    "LEGACY_GSI_BY_CONVERSATION",
    "LEGACY_GSI_UNSETTLED",
    "REPLIES_KEPT",
    "RETIRED_INDEXES",
    "SETTLED_CLAIM_STATUSES",
    "TABLE_KEY",
    "TTL_ATTRIBUTE",
    "UNSETTLED_MARK",
    "Attempt",
    "AttemptRecorder",
    "AttemptResult",
    "AttemptStore",
    "AuditChain",
    "AuditStore",
    "AuditTrail",
    "CancellationPending",
    "ClaimLost",
    "ClaimStatus",
    "ClaimStore",
    "ClaimTaken",
    "ConversationBusy",
    "ConversationCancellation",
    "ConversationOfAnotherCustomer",
    "ConversationState",
    "ConversationStatus",
    "ConversationStore",
    "Conversations",
    "EncodedHistory",
    "ItemType",
    "Ledger",
    "LedgerError",
    "LedgerTable",
    # the inbound dedupe, on the conversation item
    "MessageAnswered",
    "MessageInProgress",
    "RefundClaim",
    "RefundClaims",
    "StaleConversation",
    "SwitchReader",
    "SwitchState",
    "SwitchStore",
    "ToolSwitch",
    "approval_id",
    "approval_pk",
    "clip_detail",
    "decision_pk",
    "refund_idempotency_key",
    "require_retired_indexes",
    "switch_pk",
    "table_definition",
]

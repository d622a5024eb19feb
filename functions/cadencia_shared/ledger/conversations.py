"""Durable conversations: one item per conversation, a lease for the turn in flight, a version fence.

``conversa#{conversaId}`` holds the customer, the status, the compressed message
history and a version. A turn takes the lease (``acquire_conversation``: one
conditional UpdateItem that also binds the id to its customer), and commits with
one UpdateItem fenced on (version, owner) — and on no pending operator
cancellation — that also releases the lease. Given the inbound message, the lease
also claims it and the commit also marks it answered (``inbound`` module doc: the
dedupe lives on this item, so a turn is two UpdateItems and no transaction). A conversation waiting for a
person carries ``pendencia = humano`` (the sparse index ``scripts/atendente.py``
Queries). An operator's cancellation is an attribute of this item, so the commit's
own condition sees it atomically. The retry ceiling's exhausted keys
(``exhausted`` module) are read by the lease and written by the commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import ClientError

from ..audit_anchors import CONVERSATION_HASH, CONVERSATION_SEQ, Head, conversation_anchor, conversation_anchor_values
from ..dynamo_types import deserialize_item
from .exhausted import EXHAUSTED_ATTRIBUTE, exhausted_from_item
from .inbound import (
    ANSWERED_ATTRIBUTE,
    MESSAGE_NAME,
    PROCESSING_ATTRIBUTE,
    REPLIES_ATTRIBUTE,
    AnsweredMessages,
    message_key,
    refusal,
)
from .table import (
    GSI_UNSETTLED_PARTITION,
    GSI_UNSETTLED_SORT,
    HUMAN_PENDING_MARK,
    TABLE_KEY,
    ItemType,
    LedgerError,
    LedgerTable,
    compact_json,
    compressed_json,
    condition_failed,
    conversation_id_of,
    conversation_pk,
    from_compressed_json,
    old_item,
    serialize,
)

# An operator's cancellation: an attribute of the conversation item, so the
# commit's own condition sees it atomically (no extra item, no extra IAM action).
CANCELLATION_ATTRIBUTE = "cancelamentoSolicitadoEm"


class ConversationStatus(StrEnum):
    ACTIVE = "ativa"
    WAITING_HUMAN = "aguardando_humano"
    WAITING_APPROVAL = "aguardando_aprovacao"  # a call awaits a person's decision


class ConversationBusy(LedgerError):
    """Another invocation holds this conversation's lease."""


class ConversationOfAnotherCustomer(LedgerError):
    """The conversation id exists and belongs to a different customer."""


class StaleConversation(LedgerError):
    """The commit's version fence failed: someone else advanced the conversation."""


class CancellationPending(LedgerError):
    """The commit found an operator's cancellation on the conversation (our lease
    and version still hold): the turn must end as cancelled instead."""


@dataclass(frozen=True)
class ConversationState:
    conversation_id: str
    customer_id: int
    status: ConversationStatus
    version: int  # the fence: a commit succeeds only on the version it read
    owner: str  # the lease holder's token ("" when read without the lease)
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    message_key: str = ""  # the inbound message this lease claimed ("" for none): the commit answers it
    answered: AnsweredMessages = field(default_factory=AnsweredMessages)
    chain_anchor: Head | None = None  # the audit chain's head as of the last commit (audit_anchors)
    # Attempt keys known to be at the ceiling (the ``exhausted`` module): the retry ceiling's hint.
    exhausted: dict[str, int] = field(default_factory=dict)
    # The model's cost of the committed turns, in millionths of a USD (the cost budget).
    cost_micro_usd: int = 0
    # Customer messages answered, ever: a history cut never lowers it (a person's reply id).
    customer_messages: int = 0

    @classmethod
    def from_item(cls, conversation_id: str, item: dict[str, Any], *, owner: str,
                  message_key: str = "") -> ConversationState:
        return cls(
            conversation_id=conversation_id,
            customer_id=int(item["clienteId"]),
            status=ConversationStatus(item["status"]),
            version=int(item["versao"]),
            owner=owner,
            messages=from_compressed_json(item.get("mensagensZ"), []),
            turns=int(item.get("turnos", 0)),
            message_key=message_key,
            answered=AnsweredMessages.from_item(item),
            chain_anchor=conversation_anchor(item),
            exhausted=exhausted_from_item(item),
            cost_micro_usd=int(item.get(COST_ATTRIBUTE, 0)),
            customer_messages=int(item.get(CUSTOMER_MESSAGES_ATTRIBUTE, 0)),
        )

    def has_answered(self, message_id: str) -> bool:
        return message_key(message_id) in self.answered.answered

    def stored_reply(self, message_id: str) -> dict[str, Any] | None:
        """The reply stored for an answered message (None: not kept, or not answered)."""
        return self.answered.reply_of(message_key(message_id))


@dataclass(frozen=True)
class EncodedHistory:
    """A history with its ``compact_json`` bytes, from a caller that encoded it to
    measure it (orchestrator.history.for_storage): the commit compresses those bytes
    instead of encoding the history a second time."""

    messages: list[dict[str, Any]]
    encoded: bytes

    @classmethod
    def of(cls, messages: list[dict[str, Any]]) -> EncodedHistory:
        return cls(messages, compact_json(messages))


class ConversationCancellation(Protocol):
    """What the cancellation control and the operators' command need of the ledger."""

    def cancellation_pending(self, conversation_id: str) -> bool: ...

    def request_cancellation(self, conversation_id: str) -> bool: ...


class Conversations(ConversationCancellation, Protocol):
    """What a turn runner (the orchestrator, the WhatsApp consumer) needs of the ledger."""

    def acquire_conversation(self, *, conversation_id: str, customer_id: int, lease_s: int,
                             message_id: str | None = None) -> ConversationState: ...

    def read_conversation(self, conversation_id: str) -> ConversationState | None: ...

    def commit_conversation(self, state: ConversationState, *, messages: list[dict[str, Any]] | EncodedHistory,
                            status: ConversationStatus, reply: dict[str, Any] | None = None,
                            cancelled: bool = False, chain_head: Head | None = None,
                            exhausted: Mapping[str, int] | None = None,
                            cost_micro_usd: int = 0, customer_message: bool = True) -> ConversationState: ...

    def release_conversation(self, state: ConversationState) -> None: ...


COST_ATTRIBUTE = "custoModeloMicroUsd"
CUSTOMER_MESSAGES_ATTRIBUTE = "mensagensDoCliente"


def _commit_update(table: LedgerTable, state: ConversationState, history: EncodedHistory,
                   status: ConversationStatus, cancelled: bool, reply: dict[str, Any] | None,
                   chain_head: Head | None, exhausted: Mapping[str, int] | None = None,
                   cost_micro_usd: int = 0, counted: bool = False) -> dict[str, Any]:
    values: dict[str, Any] = {
        ":m": compressed_json(history.messages, encoded=history.encoded), ":st": status.value,
        ":um": 1, ":zero": 0, ":agora": table.iso(), ":v": state.version, ":dono": state.owner}
    # A conversation waiting for a person is in the sparse index (people list it with
    # a Query); any other status takes it out. The index's sort key is the claims'
    # ``visitadoEm`` (an item without it is not in the index): set to when the wait
    # began, kept while it lasts (``registradoEm`` too, what operators are shown).
    if status is ConversationStatus.WAITING_HUMAN:
        waiting = (", #pend = :humano, registradoEm = if_not_exists(registradoEm, :agora), "
                   "#visita = if_not_exists(#visita, :agora)")
        values[":humano"] = HUMAN_PENDING_MARK
        removed = ""
    else:
        waiting, removed = "", ", #pend, registradoEm, #visita"
    if state.message_key:
        # The claimed message answered in the same write (the inbound module's maps,
        # rewritten whole: only this fenced lease holder writes them).
        after = state.answered.with_answer(state.message_key, reply, table.now_ms() // 1000, state.version)
        waiting += f", {ANSWERED_ATTRIBUTE} = :respondidas, {REPLIES_ATTRIBUTE} = :respostas"
        values[":respondidas"], values[":respostas"] = after.answered, after.stored_replies()
    if counted:  # a customer's message answered (a person's reply, deduped the same way, is not one)
        waiting += f", {CUSTOMER_MESSAGES_ATTRIBUTE} = if_not_exists({CUSTOMER_MESSAGES_ATTRIBUTE}, :zero) + :um"
    if chain_head is not None:  # the audit chain's anchor rides on the commit (audit_anchors)
        waiting += f", {CONVERSATION_SEQ} = :cs, {CONVERSATION_HASH} = :ch"
        values[":cs"], values[":ch"] = conversation_anchor_values(chain_head)
    if exhausted:  # the retry ceiling's hint rides on the commit too (no write of its own)
        waiting += f", {EXHAUSTED_ATTRIBUTE} = :tetos"
        values[":tetos"] = dict(exhausted)
    if cost_micro_usd > 0:  # the turn's model cost, added by the fenced commit (no write of its own)
        waiting += f", {COST_ATTRIBUTE} = if_not_exists({COST_ATTRIBUTE}, :zero) + :custo"
        values[":custo"] = cost_micro_usd
    # An operator's cancellation wins over whatever the turn decided: the commit
    # of a turn that did not end as cancelled is refused while one is pending;
    # the cancelled turn's commit consumes it.
    fence = "versao = :v AND dono = :dono"
    if not cancelled:
        fence += f" AND attribute_not_exists({CANCELLATION_ATTRIBUTE})"
    return {
        "TableName": table.name,
        "Key": table.key(conversation_pk(state.conversation_id)),
        "UpdateExpression": (
            "SET mensagensZ = :m, #st = :st, versao = versao + :um, atualizadoEm = :agora, "
            f"turnos = if_not_exists(turnos, :zero) + :um{waiting} "
            f"REMOVE dono, leaseAteMs, {PROCESSING_ATTRIBUTE}{removed}"
            + (f", {CANCELLATION_ATTRIBUTE}" if cancelled else "")
        ),
        "ConditionExpression": fence,
        "ExpressionAttributeNames": {"#st": "status", "#pend": GSI_UNSETTLED_PARTITION, "#visita": GSI_UNSETTLED_SORT},
        "ExpressionAttributeValues": serialize(values),
    }


def _lease_update(table: LedgerTable, conversation_id: str, customer_id: int, lease_s: int, owner: str,
                  key: str | None) -> dict[str, Any]:
    """The lease's UpdateItem; given an inbound message's ``key`` (``message_key``), it
    also claims that message and is refused when it was already answered (the inbound module)."""
    now = table.now_ms()
    names = {"#st": "status"}
    values: dict[str, Any] = {
        ":dono": owner, ":lease": now + lease_s * 1000, ":zero": 0, ":um": 1, ":cliente": customer_id,
        ":tipo": ItemType.CONVERSATION.value, ":ativa": ConversationStatus.ACTIVE.value,
        ":agora": table.iso(now), ":agora_ms": now}
    # Without a message, a claim left by a dead lease holder is dropped with its lease.
    claim, not_answered, unclaimed = "", "", f" REMOVE {PROCESSING_ATTRIBUTE}"
    if key is not None:
        names[MESSAGE_NAME] = values[":mid"] = key
        claim, unclaimed = f", {PROCESSING_ATTRIBUTE} = :mid", ""
        not_answered = f" AND attribute_not_exists({ANSWERED_ATTRIBUTE}.{MESSAGE_NAME})"
    return {
        "TableName": table.name,
        "Key": table.key(conversation_pk(conversation_id)),
        "UpdateExpression": (
            "SET dono = :dono, leaseAteMs = :lease, versao = if_not_exists(versao, :zero) + :um, "
            "clienteId = if_not_exists(clienteId, :cliente), tipo = :tipo, "
            f"#st = if_not_exists(#st, :ativa), criadoEm = if_not_exists(criadoEm, :agora){claim}{unclaimed}"
        ),
        "ConditionExpression": (
            "(attribute_not_exists(leaseAteMs) OR leaseAteMs < :agora_ms) "
            f"AND (attribute_not_exists(clienteId) OR clienteId = :cliente){not_answered}"
        ),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": serialize(values),
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


class ConversationStore:
    """Conversations, on ``self.table`` (a ``LedgerTable``)."""

    table: LedgerTable

    def acquire_conversation(self, *, conversation_id: str, customer_id: int, lease_s: int,
                             message_id: str | None = None) -> ConversationState:
        """Take the conversation's lease and a fencing version (creating it if new),
        and, given ``message_id``, claim that inbound message in the same write.

        Raises ConversationBusy while another invocation holds an unexpired lease,
        ConversationOfAnotherCustomer when the id belongs to someone else, and, given
        ``message_id``: MessageAnswered (answered already) or MessageInProgress (a
        live lease is working on it).
        """
        owner = uuid.uuid4().hex
        key = None if message_id is None else message_key(message_id)  # hashed once per lease
        try:
            resp = self.table.client.update_item(
                **_lease_update(self.table, conversation_id, customer_id, lease_s, owner, key))
        except ClientError as err:
            if not condition_failed(err):
                raise
            # Every clause of the lease's condition holds on a missing item, so a refusal
            # always has an item: ALL_OLD returns it (no GetItem).
            old = old_item(err) or {}
            if "clienteId" in old and int(old["clienteId"]) != customer_id:
                raise ConversationOfAnotherCustomer(conversation_id) from None
            raise (refusal(old, conversation_id, message_id, key) or ConversationBusy(conversation_id)) from None
        return ConversationState.from_item(conversation_id, deserialize_item(resp["Attributes"]), owner=owner,
                                           message_key=key or "")

    def read_conversation(self, conversation_id: str) -> ConversationState | None:
        """The stored state, without taking the lease (operators, the harness, tests)."""
        item = self.table.get(conversation_pk(conversation_id))
        if item is None:
            return None
        return ConversationState.from_item(conversation_id, item, owner=item.get("dono", ""))

    def waiting_for_a_person(self, *, limit: int = 100) -> list[tuple[str, str]]:
        """(conversation id, waiting since) of conversations handed to a person, oldest
        first: a Query on the sparse index, never a Scan. The index holds keys only, and
        its sort key is when the wait began (set with ``registradoEm``, same value), so
        no conversation item is read."""
        entries = self.table.pending_entries(HUMAN_PENDING_MARK, limit=limit)
        return [(conversation_id_of(entry[TABLE_KEY]), entry[GSI_UNSETTLED_SORT]) for entry in entries]

    def commit_conversation(self, state: ConversationState, *, messages: list[dict[str, Any]] | EncodedHistory,
                            status: ConversationStatus, reply: dict[str, Any] | None = None,
                            cancelled: bool = False, chain_head: Head | None = None,
                            exhausted: Mapping[str, int] | None = None,
                            cost_micro_usd: int = 0, customer_message: bool = True) -> ConversationState:
        """Write the new state and release the lease, fenced on (version, owner) —
        and, when the lease claimed a message, mark it answered with ``reply`` in the
        same UpdateItem: the state and "this message was answered" commit together
        or not at all (so a redelivery can neither be lost nor run twice). ``exhausted``:
        the turn's exhausted attempt keys (``ExhaustedAttempts.numbers``), stored with it."""
        history = messages if isinstance(messages, EncodedHistory) else EncodedHistory.of(messages)
        counted = bool(state.message_key) and customer_message
        update = _commit_update(self.table, state, history, status, cancelled, reply, chain_head, exhausted,
                                cost_micro_usd, counted)
        try:
            self.table.client.update_item(**update)
        except ClientError as err:
            if not condition_failed(err):
                raise
            if not cancelled and self._cancelled_under_our_lease(state):
                raise CancellationPending(state.conversation_id) from None
            raise StaleConversation(state.conversation_id) from None
        return replace(state, messages=history.messages, status=status, version=state.version + 1,
                       turns=state.turns + 1, message_key="", chain_anchor=chain_head or state.chain_anchor,
                       customer_messages=state.customer_messages + counted,
                       exhausted=dict(exhausted) if exhausted else state.exhausted)

    def _cancelled_under_our_lease(self, state: ConversationState) -> bool:
        item = self.table.get_fields(conversation_pk(state.conversation_id), "versao", "dono", CANCELLATION_ATTRIBUTE)
        return (item.get("versao") == state.version and item.get("dono") == state.owner
                and CANCELLATION_ATTRIBUTE in item)

    def cancellation_pending(self, conversation_id: str) -> bool:
        """Whether an operator asked to stop this conversation's automatic turn
        (one strongly consistent GetItem of one attribute)."""
        return CANCELLATION_ATTRIBUTE in self.table.get_fields(conversation_pk(conversation_id), CANCELLATION_ATTRIBUTE)

    def request_cancellation(self, conversation_id: str) -> bool:
        """The operator's command: flag the conversation. The turn in flight (or
        the next one) ends as cancelled and consumes the flag. False: no such
        conversation. Never touches the version or the lease, so it cannot
        break a fence — it only makes a commit that ignores it fail."""
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=self.table.key(conversation_pk(conversation_id)),
                UpdateExpression=f"SET {CANCELLATION_ATTRIBUTE} = if_not_exists({CANCELLATION_ATTRIBUTE}, :agora)",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=serialize({":agora": self.table.iso()}),
            )
        except ClientError as err:
            if condition_failed(err):
                return False
            raise
        return True

    def release_conversation(self, state: ConversationState) -> None:
        """Give the lease back without changing the state (a turn that failed cleanly):
        the message it claimed is NEW again for a redelivery. After a commit (even one
        whose answer was lost) the fence fails: an answered message stays answered."""
        try:
            self.table.client.update_item(
                TableName=self.table.name,
                Key=self.table.key(conversation_pk(state.conversation_id)),
                UpdateExpression=f"REMOVE dono, leaseAteMs, {PROCESSING_ATTRIBUTE}",
                ConditionExpression="versao = :v AND dono = :dono",
                ExpressionAttributeValues=serialize({":v": state.version, ":dono": state.owner}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

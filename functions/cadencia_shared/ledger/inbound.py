"""Inbound-message dedupe: each customer message is processed once, however often it is delivered.

``mensagem#{conversa}#{mensagemId}`` is created by a conditional PutItem: the one
caller that should process the message gets NEW and an owner token; a redelivery
gets DONE (with the stored reply) or IN_PROGRESS. A message whose processing failed,
or whose processor died (expired lease), is NEW again for a new owner, so a late
writer cannot finish it. The reply is stored by the conversation's commit, in the
same transaction as the new state (``inbound_answer_update``), so "answered" and the
state commit together or not at all. Items expire (TTL) after a week.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import ClientError

from .table import (
    TABLE_KEY,
    TTL_ATTRIBUTE,
    ItemType,
    LedgerTable,
    condition_failed,
    inbound_pk,
    old_item,
    serialize,
)

INBOUND_TTL_S = 7 * 24 * 3600  # a redelivery after a week is a new message (and the reply text is personal data)


class InboundStatus(StrEnum):
    """``status`` of a ``mensagem#`` item; NEW is never stored (it is what the one processor is told)."""

    NEW = "nova"
    DONE = "respondida"
    IN_PROGRESS = "processando"
    FAILED = "falhou"


@dataclass(frozen=True)
class InboundClaim:
    conversation_id: str
    message_id: str
    status: InboundStatus
    reply: dict[str, Any] | None = None  # the stored answer of a message already answered
    owner: str = ""  # set only for the caller that processes it (NEW)


class InboundMessages(Protocol):
    """What a channel's turn runner needs of the ledger to process a message once."""

    def begin_inbound(self, *, conversation_id: str, message_id: str, lease_s: int) -> InboundClaim: ...

    def finish_inbound(self, inbound: InboundClaim, *, reply: dict[str, Any] | None, ok: bool) -> None: ...


def inbound_answer_update(table: LedgerTable, inbound: InboundClaim, reply: dict[str, Any] | None,
                          ok: bool) -> dict[str, Any]:
    """The UpdateItem that marks the message answered (DONE, with ``reply``) or
    releases it for redelivery (FAILED), only while ``inbound``'s owner holds it."""
    values: dict[str, Any] = {
        ":st": (InboundStatus.DONE if ok else InboundStatus.FAILED).value,
        ":agora": table.iso(),
        ":dono": inbound.owner,
        ":proc": InboundStatus.IN_PROGRESS.value,
    }
    sets = "SET #st = :st, concluidaEm = :agora"
    if reply is not None:
        sets += ", resposta = :r"
        values[":r"] = json.dumps(reply, ensure_ascii=False)
    return {
        "TableName": table.name,
        "Key": table.key(inbound_pk(inbound.conversation_id, inbound.message_id)),
        "UpdateExpression": sets + " REMOVE leaseAteMs",
        # Only a message still being processed by this owner: an answered message is
        # never turned back into a failed one (a commit whose answer was lost, then
        # the failure path — tests/test_lost_commit_answer.py).
        "ConditionExpression": "dono = :dono AND #st = :proc",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": serialize(values),
    }


class InboundStore:
    """Inbound messages, on ``self.table`` (a ``LedgerTable``)."""

    table: LedgerTable

    def begin_inbound(self, *, conversation_id: str, message_id: str, lease_s: int) -> InboundClaim:
        """Mark an inbound message as being processed, once (module doc)."""
        now = self.table.now_ms()
        owner = uuid.uuid4().hex
        pk = inbound_pk(conversation_id, message_id)
        try:
            self.table.client.put_item(
                TableName=self.table.name,
                Item=serialize({
                    TABLE_KEY: pk, "tipo": ItemType.INBOUND.value, "status": InboundStatus.IN_PROGRESS.value,
                    "dono": owner, "leaseAteMs": now + lease_s * 1000, "recebidaEm": self.table.iso(now),
                    TTL_ATTRIBUTE: now // 1000 + INBOUND_TTL_S,
                }),
                ConditionExpression="attribute_not_exists(pk) OR #st = :falhou OR (#st = :proc AND leaseAteMs < :agora)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize({
                    ":falhou": InboundStatus.FAILED.value, ":proc": InboundStatus.IN_PROGRESS.value, ":agora": now}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            old = old_item(err) or self.table.get(pk) or {}
            if old.get("status") == InboundStatus.DONE.value:
                return InboundClaim(conversation_id, message_id, InboundStatus.DONE, json.loads(old["resposta"]))
            return InboundClaim(conversation_id, message_id, InboundStatus.IN_PROGRESS)
        return InboundClaim(conversation_id, message_id, InboundStatus.NEW, owner=owner)

    def finish_inbound(self, inbound: InboundClaim, *, reply: dict[str, Any] | None, ok: bool) -> None:
        """Store the reply (DONE) or release the message for redelivery (FAILED),
        only while this caller still owns it."""
        try:
            self.table.client.update_item(**inbound_answer_update(self.table, inbound, reply, ok))
        except ClientError as err:
            if not condition_failed(err):
                raise

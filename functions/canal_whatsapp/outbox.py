"""The outbox: one record per reply, keyed by the reply.

Item ``envio#{key}`` in the ledger table: an agent's reply is keyed by the customer
message it answers (its wamid), a person's reply by ``orchestrator.human_reply``'s
reply id. Item (this module owns that prefix; the
ledger module owns the others). The Cloud API has no idempotency key, so
"exactly once" is made of two rules:

1. a reply is *sent* only by whoever moves its record from ``pendente`` (or
   ``tentar_de_novo``) to ``enviando`` with one conditional write, so two
   invocations holding the same reply never both send it;
2. a record found ``enviando`` with an expired lease belongs to a sender that died
   between the request and its answer: the message may have been delivered, so it
   becomes ``desconhecido`` (alarmed), never sent again.

The record holds the recipient and the text (needed to send) and expires with
the ledger's TTL; nothing of it is logged.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from cadencia_shared.dynamo_types import deserialize_item
from cadencia_shared.ledger import INBOUND_TTL_S, TABLE_KEY, TTL_ATTRIBUTE, Ledger
from cadencia_shared.ledger.table import condition_failed, serialize
from cadencia_shared.observability import count

from .resends import WINDOW_S

ITEM_TYPE = "envio"
FAILED_SENDS_METRIC = "EnviosWhatsappFalhos"  # {Motivo}: alarmed


class OutboxStatus(StrEnum):
    PENDING = "pendente"
    RETRY = "tentar_de_novo"  # a definitive "not sent" that may be retried
    SENDING = "enviando"
    SENT = "enviado"
    FAILED = "falhou"  # not sent, no more attempts: alarmed
    UNKNOWN = "desconhecido"  # may have been delivered: never re-sent, alarmed
    OUTSIDE_WINDOW = "fora_da_janela"  # 131047: handed off to a person


SENDABLE = (OutboxStatus.PENDING, OutboxStatus.RETRY)


@dataclass(frozen=True)
class OutgoingReply:
    key: str  # the record's key: the customer's wamid for the agent's reply to it
    conversation_id: str | None
    phone_number_id: str
    to: str
    body: str
    reply_to: str | None  # context.message_id: the customer message quoted, if any
    # When the customer's 24-hour window closes (epoch ms); None: 24 h from now, a bound
    # that may be late by the time the message waited (the Cloud API's 131047 decides).
    window_ends_ms: int | None = None

    @classmethod
    def answering(cls, wamid: str, *, conversation_id: str | None, phone_number_id: str, to: str,
                  body: str) -> OutgoingReply:
        """The agent's reply to one customer message: keyed by it and quoting it."""
        return cls(key=wamid, conversation_id=conversation_id, phone_number_id=phone_number_id, to=to, body=body,
                   reply_to=wamid)


@dataclass(frozen=True)
class SendClaim:
    """The right to send one reply, with what the record says to send."""

    owner: str
    attempt: int
    reply: OutgoingReply
    created_ms: int | None = None  # None: a record written before resends existed (never deferred)

    @property
    def key(self) -> str:
        return self.reply.key


class Outbox:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.table = ledger.table  # the ledger's table module: its clock, reads and serializer

    def _key(self, key: str) -> dict[str, Any]:
        return self.table.key(f"{ITEM_TYPE}#{key}")

    def record(self, reply: OutgoingReply) -> None:
        """Write the reply as ``pendente`` once; a second call changes nothing."""
        now = self.table.now_ms()
        try:
            self.table.client.put_item(
                TableName=self.table.name,
                Item=serialize({
                    TABLE_KEY: f"{ITEM_TYPE}#{reply.key}", "tipo": ITEM_TYPE,
                    "status": OutboxStatus.PENDING.value, "tentativas": 0,
                    "conversa": reply.conversation_id, "phoneNumberId": reply.phone_number_id,
                    "para": reply.to, "texto": reply.body, "contexto": reply.reply_to or "",
                    "criadoEm": self.table.iso(now),
                    "criadoEmMs": now, "janelaAteMs": reply.window_ends_ms or now + WINDOW_S * 1000,
                    TTL_ATTRIBUTE: now // 1000 + INBOUND_TTL_S,
                }),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

    def status(self, key: str) -> OutboxStatus | None:
        item = self.table.get(f"{ITEM_TYPE}#{key}")
        return None if item is None else OutboxStatus(item["status"])

    def claim(self, key: str, *, lease_s: int) -> SendClaim | None:
        """Take the right to send (None: someone else sent it, is sending it, or it is final)."""
        now, owner = self.table.now_ms(), uuid.uuid4().hex
        try:
            resp = self.table.client.update_item(
                TableName=self.table.name, Key=self._key(key),
                UpdateExpression="SET #st = :enviando, dono = :dono, leaseAteMs = :lease ADD tentativas :um",
                ConditionExpression="#st IN (:pendente, :retry)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize({
                    ":enviando": OutboxStatus.SENDING.value, ":dono": owner, ":lease": now + lease_s * 1000,
                    ":um": 1, ":pendente": OutboxStatus.PENDING.value, ":retry": OutboxStatus.RETRY.value,
                }),
                ReturnValues="ALL_NEW",
            )
        except ClientError as err:
            if condition_failed(err):
                self._expire_dead_sender(key, now)
                return None
            raise
        item = deserialize_item(resp["Attributes"])
        # Records written before person's replies existed have no ``contexto``: they
        # were all agent replies, which quote the message they are keyed by.
        window = item.get("janelaAteMs")
        stored = OutgoingReply(key=key, conversation_id=item.get("conversa"), phone_number_id=item["phoneNumberId"],
                               to=item["para"], body=item["texto"], reply_to=item.get("contexto", key) or None,
                               window_ends_ms=None if window is None else int(window))
        created = item.get("criadoEmMs")
        return SendClaim(owner=owner, attempt=int(item["tentativas"]), reply=stored,
                         created_ms=None if created is None else int(created))

    def _expire_dead_sender(self, key: str, now_ms: int) -> None:
        """A sender whose lease ran out died mid-request: the outcome is unknown."""
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=self._key(key),
                UpdateExpression="SET #st = :desconhecido REMOVE dono, leaseAteMs",
                ConditionExpression="#st = :enviando AND leaseAteMs < :agora",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize({
                    ":desconhecido": OutboxStatus.UNKNOWN.value, ":enviando": OutboxStatus.SENDING.value,
                    ":agora": now_ms,
                }),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            return
        count(FAILED_SENDS_METRIC, {"Motivo": "remetente_interrompido"})  # once: the write above is conditional

    def finish(self, claim: SendClaim, status: OutboxStatus, *, detail: str | None = None) -> None:
        """Record the outcome, only while ``claim`` still owns the record."""
        values: dict[str, Any] = {":st": status.value, ":dono": claim.owner, ":agora": self.table.iso()}
        sets = "SET #st = :st, atualizadoEm = :agora"
        if detail is not None:
            sets += ", detalhe = :d"
            values[":d"] = detail
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=self._key(claim.key),
                UpdateExpression=sets + " REMOVE dono, leaseAteMs", ConditionExpression="dono = :dono",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize(values),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

    def read(self, key: str) -> dict[str, Any] | None:
        return self.table.get(f"{ITEM_TYPE}#{key}")

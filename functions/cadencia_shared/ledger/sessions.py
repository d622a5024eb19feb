"""A session per turn: the key that will sign this turn's tool calls (SEAL, docs/seal.md).

When the orchestrator takes a conversation's lease for a turn it opens a session:
an Ed25519 key pair made in its memory, and one item ``sessao#{id}`` in the ledger
holding the public key and what the turn may do — the conversation, the customer
the channel bound to it, the tools allowed, the limits (a refund: only this
customer's orders, at most the approval threshold unless an approval record for
exactly those arguments is named) and the expiry, the turn's deadline. The private
key never leaves the process (``TurnSession`` holds it; nothing serializes it).

The turn's end closes the session (one conditional UpdateItem); a closed or expired
session verifies nothing (``read_open_session`` answers ``None``). The item's TTL
attribute removes it a day after its expiry.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Collection
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .table import TTL_ATTRIBUTE, ItemType, LedgerTable, checked_id, condition_failed, serialize

SESSION_PREFIX = "sessao#"
SESSION_OPEN = "aberta"
SESSION_CLOSED = "fechada"
SESSION_KEPT_S = 24 * 3600  # the item outlives its expiry by a day (the TTL), for the audit's sake


def session_pk(session_id: str) -> str:
    return SESSION_PREFIX + checked_id(session_id)


@dataclass(frozen=True)
class SessionLimits:
    """What a refund may be under this session (the tool edge checks each call)."""

    refund_customer_orders_only: bool = True
    refund_max_without_approval: Decimal = Decimal("500")

    def to_item(self) -> dict[str, Any]:
        return {"reembolsoSomentePedidosDoCliente": self.refund_customer_orders_only,
                "reembolsoMaximoSemAprovacao": self.refund_max_without_approval}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> SessionLimits:
        return cls(refund_customer_orders_only=bool(item["reembolsoSomentePedidosDoCliente"]),
                   refund_max_without_approval=Decimal(str(item["reembolsoMaximoSemAprovacao"])))


@dataclass(frozen=True)
class SessionRecord:
    """A session as the ledger holds it: what a tool's edge verifies against."""

    session_id: str
    public_key: bytes  # raw Ed25519 public key, 32 bytes
    conversation_id: str
    customer_id: int
    tools: frozenset[str]
    limits: SessionLimits
    expires_at_ms: int
    state: str

    def verifier(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(self.public_key)


@dataclass(frozen=True)
class TurnSession:
    """The orchestrator's side of an open session: the record and, in memory only,
    the private key (``repr`` never shows it)."""

    record: SessionRecord
    private_key: Ed25519PrivateKey = field(repr=False)

    @property
    def session_id(self) -> str:
        return self.record.session_id

    def sign(self, message: bytes) -> bytes:
        return self.private_key.sign(message)


class SessionStore:
    """Sessions over one ``LedgerTable`` (the orchestrator writes; tools only read)."""

    def __init__(self, table: LedgerTable) -> None:
        self.table = table

    def open_session(self, *, conversation_id: str, customer_id: int, tools: Collection[str],
                     limits: SessionLimits, expires_at_ms: int) -> TurnSession:
        """A new key pair and its session item (PutItem, must not exist)."""
        private_key = Ed25519PrivateKey.generate()
        public = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        record = SessionRecord(session_id=secrets.token_urlsafe(18), public_key=public,
                               conversation_id=checked_id(conversation_id), customer_id=customer_id,
                               tools=frozenset(tools), limits=limits, expires_at_ms=expires_at_ms,
                               state=SESSION_OPEN)
        self.table.put_new({
            "pk": session_pk(record.session_id), "tipo": ItemType.SESSION.value,
            "chavePublica": base64.b64encode(public).decode(), "conversaId": record.conversation_id,
            "clienteId": customer_id, "ferramentas": sorted(record.tools), "limites": limits.to_item(),
            "validaAteMs": expires_at_ms, "estado": SESSION_OPEN, "abertaEm": self.table.iso(),
            TTL_ATTRIBUTE: expires_at_ms // 1000 + SESSION_KEPT_S,
        })
        return TurnSession(record, private_key)

    def close_session(self, session_id: str) -> None:
        """The session verifies nothing from now on (idempotent; a missing item stays missing)."""
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=self.table.key(session_pk(session_id)),
                UpdateExpression="SET estado = :closed, fechadaEm = :at",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=serialize({":closed": SESSION_CLOSED, ":at": self.table.iso()}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

    def read_session(self, session_id: str) -> SessionRecord | None:
        """The stored session, open or not; ``None`` if there is none (or the id is malformed)."""
        try:
            pk = session_pk(session_id)
        except ValueError:
            return None
        item = self.table.get(pk)
        if item is None or item.get("tipo") != ItemType.SESSION.value:
            return None
        return SessionRecord(
            session_id=session_id, public_key=base64.b64decode(item["chavePublica"]),
            conversation_id=str(item["conversaId"]), customer_id=int(item["clienteId"]),
            tools=frozenset(str(t) for t in item["ferramentas"]), limits=SessionLimits.from_item(item["limites"]),
            expires_at_ms=int(item["validaAteMs"]), state=str(item["estado"]),
        )

    def read_open_session(self, session_id: str) -> SessionRecord | None:
        """The session only while it can verify: open and before its expiry (the table's clock)."""
        record = self.read_session(session_id)
        if record is None or record.state != SESSION_OPEN or self.table.now_ms() >= record.expires_at_ms:
            return None
        return record

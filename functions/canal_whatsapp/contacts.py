"""Where a conversation's replies go: the channel's address of each conversation.

Item ``contato#{conversaId}`` in the ledger table (this module owns that prefix):
the customer's ``wa_id`` and the business number (``phone_number_id``) the
customer last wrote to in that conversation. The queue consumer writes it before
each turn; a person's reply (``orchestrator.human_reply``) reads it, because the
conversation id holds the customer id, never the phone number (docs/whatsapp.md).

The number is personal data: the item expires with the ledger's TTL, like the
outbox, and nothing of it is logged.
"""

from __future__ import annotations

from dataclasses import dataclass

from cadencia_shared.ledger import INBOUND_TTL_S, TABLE_KEY, TTL_ATTRIBUTE, Ledger
from cadencia_shared.ledger.table import serialize

ITEM_TYPE = "contato"


@dataclass(frozen=True)
class Contact:
    wa_id: str
    phone_number_id: str
    updated_ms: int | None = None  # when the customer last wrote (as recorded; None: unknown)


class ChannelContacts:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.table = ledger.table  # the ledger's table module: its clock, reads and serializer

    def remember(self, conversation_id: str, contact: Contact) -> None:
        """Record (or refresh) the conversation's address: one unconditional write,
        so the number the customer wrote from last is the one a person answers."""
        now = self.table.now_ms()
        self.table.client.put_item(
            TableName=self.table.name,
            Item=serialize({
                TABLE_KEY: f"{ITEM_TYPE}#{conversation_id}", "tipo": ITEM_TYPE, "waId": contact.wa_id,
                "phoneNumberId": contact.phone_number_id, "atualizadoEm": self.table.iso(now), "atualizadoEmMs": now,
                TTL_ATTRIBUTE: now // 1000 + INBOUND_TTL_S,
            }),
        )

    def find(self, conversation_id: str) -> Contact | None:
        item = self.table.get(f"{ITEM_TYPE}#{conversation_id}")
        if item is None:
            return None
        updated = item.get("atualizadoEmMs")
        return Contact(wa_id=str(item["waId"]), phone_number_id=str(item["phoneNumberId"]),
                       updated_ms=None if updated is None else int(updated))

"""A person's reply to a handed-off conversation, sent the way the agent's replies go.

    reply id = SHA-256(conversation, messages the     the same reply typed again, before the customer
               customer side had, text)               writes again, is the same reply
    ledger: lease the conversation, claiming the       (as a customer message: at most one writer)
      reply id as an inbound message in the same write ─► append the text ─► commit, fenced, ONE
         UpdateItem with "this reply was written" (so it is in the history once, whatever crashes or retries)
    channel: Sender.deliver(outbox record envio#{reply id}) ─► POST /{phone-number-id}/messages

The send is the channel's own (``canal_whatsapp.delivery.Sender``): the outbox record,
the conditional claim, the bounded backoff, the alarm and the 24-hour window rule
(131047 → ``fora_da_janela``, metric, audit) are the agent's. Running the same reply again
after a crash — between the claim and the commit, the commit and the outbox record, or the
record and the send — finishes it: the history gets the text once and the customer gets it
at most once (exactly once unless the Cloud API never answered a request that left, then
``desconhecido``, never re-sent, alarmed).

Why the reply id is derived, not drawn at random: the person's terminal may be killed
after the reply was written and before it printed anything, and running the command again
must not send a second copy. It is derived from the text and from how many messages the
customer's side of the conversation had (``user`` entries: the customer's messages and the
tools' results), which a person's own reply never changes: the same text run again
finishes the same reply, and the same text after the customer wrote again ("ok" to two
questions) is a new one. The price: the same text twice with nothing from the customer in
between is one reply (the second answer says ``repetida``); a customer message that lands
between a crash and the re-run makes the re-run a new reply (the text may then be sent twice).

Where the reply goes is the channel's address of the conversation (``contato#``, written by
the queue consumer). A conversation without one (the direct entry, or its address expired)
gets the text in its history only, and the answer says it was not sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from cadencia_shared.ledger import (
    CancellationPending,
    ConversationBusy,
    ConversationState,
    ConversationStatus,
    Ledger,
    MessageAnswered,
    MessageInProgress,
    StaleConversation,
)
from cadencia_shared.models import EDGE_CONFIG, ConversationId, CustomerMessage
from canal_whatsapp.contacts import ChannelContacts
from canal_whatsapp.delivery import NoTimeToSend, Sender, SendInProgress
from canal_whatsapp.outbox import OutgoingReply

from . import history

REPLY_ID_PREFIX = "atendente-"
NOT_SENT_NO_CHANNEL = "sem_canal"
SEND_PENDING = "envio_pendente"  # not sent yet, nothing claimed: running the reply again sends it
SEND_ELSEWHERE = "envio_em_andamento"  # another invocation holds the send: its outcome is recorded


class HumanReplyRequest(BaseModel):
    """The event of ``cadencia-resposta-atendente`` (strict: the text obeys the same
    rules as a customer's — no control, bidi or invisible characters, at most 4000)."""

    model_config = EDGE_CONFIG

    conversaId: ConversationId
    texto: CustomerMessage


class HumanReplyRefused(Exception):
    """Nothing was written or sent; ``code`` says why (the attendant reads ``message``);
    the handler answers them as ``erro.codigo`` / ``erro.mensagem``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class HumanReplyOutcome:
    reply_id: str
    delivery: str  # an OutboxStatus value, or NOT_SENT_NO_CHANNEL / SEND_PENDING / SEND_ELSEWHERE
    repeated: bool  # this reply had already been written (a re-run): nothing new in the history

    def as_answer(self) -> dict[str, Any]:
        """The Lambda's answer: its wire fields stay Lab 87's (respostaId, envio, repetida)."""
        return {"ok": True, "respostaId": self.reply_id, "envio": self.delivery, "repetida": self.repeated}


def reply_id(conversation_id: str, customer_side_count: int, text: str) -> str:
    digest = hashlib.sha256(f"{conversation_id}\n{customer_side_count}\n{text}".encode()).hexdigest()[:32]
    return REPLY_ID_PREFIX + digest


def reply_position(state: ConversationState) -> int:
    """Where a person's reply stands: the customer messages answered, ever (a history cut
    never lowers it, so the same text after a later message is a new reply). A
    conversation stored before the counter was kept counts its history's entries."""
    return state.customer_messages or customer_side_messages(state.messages)


def customer_side_messages(messages: list[dict[str, Any]]) -> int:
    """How many ``user`` entries the history holds (a person's reply adds none)."""
    return sum(1 for message in messages if message.get("role") == "user")


@dataclass
class HumanReplies:
    ledger: Ledger
    contacts: ChannelContacts
    sender: Sender
    lease_s: int = 30

    def reply(self, request: HumanReplyRequest, *, time_left_s: Callable[[], float] | None = None,
              author: dict[str, str] | None = None) -> HumanReplyOutcome:
        """``author``: who replies, as the audit records it (``identity.Person.audit``)."""
        current = self.ledger.read_conversation(request.conversaId)
        if current is None:  # nothing is written for nobody
            raise HumanReplyRefused("conversa_inexistente", "Conversa não encontrada.")
        rid = reply_id(request.conversaId, reply_position(current), request.texto)
        written, repeated = self._write_once(request, current, rid, author or {})
        if not written:  # no channel address: the text is in the history only
            return HumanReplyOutcome(rid, NOT_SENT_NO_CHANNEL, repeated)
        outgoing = OutgoingReply(key=rid, conversation_id=request.conversaId, phone_number_id=written["phoneNumberId"],
                                 to=written["para"], body=request.texto, reply_to=None)
        try:
            status = self.sender.deliver(outgoing, time_left_s=time_left_s).value
        except NoTimeToSend:
            status = SEND_PENDING
        except SendInProgress:
            status = SEND_ELSEWHERE
        return HumanReplyOutcome(rid, status, repeated)

    def _write_once(self, request: HumanReplyRequest, current: ConversationState, rid: str,
                    author: dict[str, str]) -> tuple[dict[str, Any], bool]:
        """The reply in the conversation's history exactly once; returns where it goes
        (as decided when it was written) and whether it had been written before.

        The same inbound dedupe as a customer's message (the reply id is the message
        id): the lease claims it, the commit marks it answered with where it went."""
        if current.has_answered(rid):  # a re-run: nothing to write, no lease taken
            return self._written_before(request, rid, current.stored_reply(rid)), True
        _require_waiting(current.status)
        try:
            state = self.ledger.acquire_conversation(conversation_id=request.conversaId,
                                                     customer_id=current.customer_id, lease_s=self.lease_s,
                                                     message_id=rid)
        except MessageAnswered as answered:  # written by a run that finished after our read
            return self._written_before(request, rid, answered.reply), True
        except MessageInProgress:
            raise HumanReplyRefused(
                "resposta_em_andamento", "Esta mesma resposta está sendo gravada agora; tente de novo em instantes.",
            ) from None
        except ConversationBusy:
            raise HumanReplyRefused("conversa_ocupada",
                                    "A conversa está sendo processada agora; tente de novo em instantes.") from None
        try:
            return self._commit(request, state, rid, author), False
        except BaseException:
            # Fenced: a written reply is never turned back (the release fails after a commit).
            self.ledger.release_conversation(state)
            raise

    def _written_before(self, request: HumanReplyRequest, rid: str, stored: dict[str, Any] | None
                        ) -> dict[str, Any]:
        """Where a reply written before goes. Nowhere when it was written without a
        channel address (stored ``{}``). Else the address its outbox record holds, the
        one it was written with; without a record (killed between the commit and the
        record, or the record expired) — or when the ledger no longer keeps the reply
        (its most recent answers only) — the conversation's channel address now. The
        outbox record keyed by the reply id still sends it at most once. The number is
        never read from the conversation item: that item never expires (``_commit``)."""
        if stored is not None and not stored:
            return {}
        record = self.sender.outbox.read(rid)
        if record is not None:
            return {"para": record["para"], "phoneNumberId": record["phoneNumberId"]}
        contact = self.contacts.find(request.conversaId)
        return {} if contact is None else {"para": contact.wa_id, "phoneNumberId": contact.phone_number_id}

    def _commit(self, request: HumanReplyRequest, state: ConversationState, rid: str,
                author: dict[str, str]) -> dict[str, Any]:
        contact = self.contacts.find(request.conversaId)
        written = {} if contact is None else {"para": contact.wa_id, "phoneNumberId": contact.phone_number_id}
        try:
            _require_waiting(state.status)
            # Blocks only, never a whole turn: the reply id counts the customer's messages,
            # so a cut turn would give a re-run of this reply another id (written, sent twice).
            messages = history.for_storage(history.append_assistant_text(state.messages, request.texto),
                                           cut_turns=False)
            # Stored: whether it went to the channel, not where — the conversation item never
            # expires, while the number lives only where the ledger's TTL removes it
            # (``contato#``, ``envio#``: docs/architecture.md, personal data).
            stored = {"canal": "whatsapp"} if written else {}
            self.ledger.commit_conversation(state, messages=messages, status=state.status, reply=stored,
                                            customer_message=False)
        except (CancellationPending, StaleConversation):
            raise HumanReplyRefused("conversa_ocupada", "A conversa mudou enquanto a resposta era gravada; "
                                                        "confira a conversa e tente de novo.") from None
        self.ledger.append_audit(conversation_id=request.conversaId, event="ATENDENTE_RESPONDEU",
                                 details={"respostaId": rid, "caracteres": len(request.texto),
                                           "canal": "whatsapp" if written else NOT_SENT_NO_CHANNEL, **author})
        return written


def _require_waiting(status: ConversationStatus) -> None:
    if status is not ConversationStatus.WAITING_HUMAN:
        raise HumanReplyRefused("conversa_nao_aguarda_atendente",
                                "Esta conversa não está com um atendente (status: " + status.value + ").")

"""Inbound-message dedupe, kept on the conversation item: each message is processed once.

There is no item per message (it cost a PutItem and turned the commit into
a two-item transaction). The conversation item carries:

- ``emProcessamento``: the key of the message the current lease is working on;
- ``respondidas``: a map {message key: epoch seconds answered} of the messages
  answered in the last ``INBOUND_TTL_S`` (a redelivery within it is DONE);
- ``respostas``: {message key: {``v``: the conversation version that answered it,
  ``r``: the stored reply}} of the ``REPLIES_KEPT`` most recently answered messages
  only, stored as zlib-compressed JSON like the history (each KB of the item is one
  more write unit on every lease and commit: compressed, two typical replies take
  ~180 bytes instead of ~300, which kept the benchmark's status-turn conversation
  under 1 KB). Recency is the fenced version, never a clock: answers within one second,
  or from Lambdas whose clocks disagree, are still ordered.

The lease (``ConversationStore.acquire_conversation``, one conditional UpdateItem)
sets ``emProcessamento`` and refuses a message already in ``respondidas``; on a
refusal, ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` tells apart: another
customer's conversation, the message answered (DONE, ``MessageAnswered`` with the
reply when still kept), the message held by a live lease (IN_PROGRESS,
``MessageInProgress``), another message held by a live lease (``ConversationBusy``).
The commit (one UpdateItem fenced on version, owner and no pending cancellation)
rewrites both maps with the message answered and expired ids pruned — safe as a whole
rewrite because only the fenced lease holder writes them — and removes
``emProcessamento``. A release on failure removes the lease and ``emProcessamento``
only: the message is NEW again for a redelivery, and a commit whose answer was lost
can never be un-answered (the release's fence fails after a commit).

A message key is ``base64url(SHA-256(message id))[:12]`` (72 bits: compact, and any
id, ``#``, ``.`` and quotes included, becomes a safe map key, still always passed as
an ``ExpressionAttributeNames`` value, never built into an expression).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

from .table import LedgerError, compressed_json, from_compressed_json

INBOUND_TTL_S = 7 * 24 * 3600  # a redelivery after a week is a new message (and the reply text is personal data)
REPLIES_KEPT = 2  # replies stored for a redelivery; older answered ids are DONE with no reply (docs/whatsapp.md)
PROCESSING_ATTRIBUTE = "emProcessamento"
ANSWERED_ATTRIBUTE = "respondidas"
REPLIES_ATTRIBUTE = "respostas"
MESSAGE_NAME = "#mid"  # the ExpressionAttributeNames placeholder of the message's key


def message_key(message_id: str) -> str:
    """The message's compact, map-safe key (module doc)."""
    return base64.urlsafe_b64encode(hashlib.sha256(message_id.encode()).digest()[:9]).decode()


class MessageAnswered(LedgerError):
    """This message was already answered: ``reply`` is its stored reply (None when
    it is older than the ``REPLIES_KEPT`` most recent), ``status`` the conversation's."""

    def __init__(self, message_id: str, reply: dict[str, Any] | None, status: str) -> None:
        super().__init__(message_id)
        self.reply = reply
        self.status = status


class MessageInProgress(LedgerError):
    """A live lease is working on this very message (a redelivery racing the first)."""


@dataclass(frozen=True)
class AnsweredMessages:
    """The conversation item's ``respondidas`` and ``respostas`` maps (module doc)."""

    answered: dict[str, int] = field(default_factory=dict)  # key -> epoch seconds answered
    # key -> {"v": version that answered it, "r": the reply}, the most recent only
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> AnsweredMessages:
        return cls({k: int(v) for k, v in item.get(ANSWERED_ATTRIBUTE, {}).items()},
                   from_compressed_json(item.get(REPLIES_ATTRIBUTE), {}))

    def stored_replies(self) -> bytes:
        """``respostas`` as the item stores it (module doc)."""
        return compressed_json(self.replies)

    def reply_of(self, key: str) -> dict[str, Any] | None:
        stored = self.replies.get(key)
        return None if stored is None else dict(stored["r"])

    def with_answer(self, key: str, reply: dict[str, Any] | None, now_s: int, version: int) -> AnsweredMessages:
        """These maps after ``key`` is answered at ``now_s`` by the lease of ``version``:
        ids older than the redelivery window dropped, replies kept only for the most recent."""
        answered = {k: at for k, at in self.answered.items() if at > now_s - INBOUND_TTL_S and k != key}
        answered[key] = now_s
        newest_first = sorted((k for k in self.replies if k in answered and k != key),
                              key=lambda k: int(self.replies[k]["v"]), reverse=True)
        replies = {k: self.replies[k] for k in newest_first[:REPLIES_KEPT - 1]}
        if reply is not None:
            replies[key] = {"v": version, "r": reply}
        return AnsweredMessages(answered, replies)


def refusal(old: dict[str, Any], conversation_id: str, message_id: str | None,
            key: str | None) -> LedgerError | None:
    """What a lease refused on a live lease means for ``message_id``, whose
    ``message_key`` the lease computed as ``key`` (None: the caller decides between
    busy and another customer)."""
    if message_id is None or key is None:
        return None
    stored = AnsweredMessages.from_item(old)
    if key in stored.answered:
        return MessageAnswered(message_id, stored.reply_of(key), str(old.get("status", "")))
    if old.get(PROCESSING_ATTRIBUTE) == key:
        return MessageInProgress(conversation_id)
    return None

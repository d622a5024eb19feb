"""SEAL envelopes (``seal/v1``): a tool call signed by the turn's session key, verified
at the tool's edge before any of its logic runs (docs/seal.md).

The envelope rides in the tool event under ``selo``: the session id, a random
``jti``, the tool, the SHA-256 of the call's canonical arguments (the event without
``selo``, ``conversaId`` and ``clienteId``: ``approval_arguments.canonical_arguments``,
the digest approvals bind), the conversation, the customer, issued-at and expiry
(ms), and an Ed25519 signature over the canonical JSON of all of those.

``verify`` answers ``None`` (authorized) or a ``SealRefusal`` with a numeric code;
the single-use ``jti`` is taken last, by a conditional PutItem, so a refused call
consumes nothing and two replays of one envelope authorize exactly one call.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import IntEnum
from typing import Any

from botocore.exceptions import ClientError
from cryptography.exceptions import InvalidSignature

from .approval_arguments import canonical_arguments
from .ledger.sessions import SessionRecord, SessionStore, TurnSession
from .ledger.table import TTL_ATTRIBUTE, LedgerTable, checked_id, condition_failed

VERSION = "seal/v1"
ENVELOPE_FIELD = "selo"
IDENTITY_FIELDS = ("conversaId", "clienteId")
REFUND_TOOL = "emitir_reembolso"
REFUND_AMOUNT_FIELD = "valor"
APPROVAL_FIELD = "aprovacaoId"  # inside the envelope: the approval record this call claims
ENVELOPE_TTL_MS = 60_000  # an envelope is good for one invoke, not for the whole turn
JTI_KEPT_S = 24 * 3600
_FIELDS = ("v", "sessao", "jti", "ferramenta", "argsSha256", "conversaId", "clienteId", "emitidoEm", "expiraEm")


class SealCode(IntEnum):
    ENVELOPE_MISSING = 1001
    ENVELOPE_MALFORMED = 1002
    SESSION_NOT_OPEN = 1003  # unknown or closed
    EXPIRED = 1004  # the session or the envelope
    BAD_SIGNATURE = 1005
    REPLAYED = 1006  # the jti was used already
    TOOL_NOT_ALLOWED = 2000
    ARGUMENTS_CHANGED = 2001
    WRONG_CONVERSATION = 2002
    WRONG_CUSTOMER = 2003
    ABOVE_LIMIT = 2004  # a refund above the threshold names no approval
    APPROVAL_NOT_BINDING = 2005  # the named approval does not bind exactly these arguments
    APPROVAL_NOT_USABLE = 2006  # not approved, or expired


@dataclass(frozen=True)
class SealRefusal:
    code: SealCode
    envelope_id: str | None  # the jti, when the envelope had one (audit: no personal data)


ApprovalCheck = Callable[[str, str, str, dict[str, Any]], SealCode | None]
"""(approval id, conversation, tool, arguments) → None when that approval, approved by the
person's decision record and unexpired, binds exactly these arguments; else the refusal's code."""


def call_arguments(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != ENVELOPE_FIELD and k not in IDENTITY_FIELDS}


def _message(fields: Mapping[str, Any]) -> bytes:
    return json.dumps({k: fields[k] for k in _FIELDS}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def seal(event: Mapping[str, Any], *, tool: str, session: TurnSession, now_ms: int,
         approval_id: str | None = None) -> dict[str, Any]:
    """The event with its signed envelope (the orchestrator's invoker calls this)."""
    fields: dict[str, Any] = {
        "v": VERSION, "sessao": session.session_id, "jti": secrets.token_urlsafe(18), "ferramenta": tool,
        "argsSha256": canonical_arguments(call_arguments(event))[1],
        "conversaId": event.get("conversaId"), "clienteId": event.get("clienteId"),
        "emitidoEm": now_ms, "expiraEm": min(now_ms + ENVELOPE_TTL_MS, session.record.expires_at_ms),
    }
    envelope = {**fields, "assinatura": base64.b64encode(session.sign(_message(fields))).decode()}
    if approval_id is not None:
        envelope[APPROVAL_FIELD] = approval_id
    return {**call_arguments(event), **{k: event[k] for k in IDENTITY_FIELDS if k in event},
            ENVELOPE_FIELD: envelope}


def _well_formed(envelope: Any) -> bool:
    if not isinstance(envelope, dict) or envelope.get("v") != VERSION:
        return False
    texts = ("sessao", "jti", "ferramenta", "argsSha256", "conversaId", "assinatura")
    numbers = ("clienteId", "emitidoEm", "expiraEm")
    if any(not isinstance(envelope.get(k), str) or not envelope[k] or len(envelope[k]) > 200 for k in texts):
        return False
    if any(type(envelope.get(k)) is not int for k in numbers):
        return False
    approval = envelope.get(APPROVAL_FIELD)
    allowed = set(_FIELDS) | {"assinatura", APPROVAL_FIELD}
    return set(envelope) <= allowed and (approval is None or (isinstance(approval, str) and 0 < len(approval) <= 200))


class Verifier:
    """The tool edge's checks, in order; the jti is claimed only after all pass."""

    def __init__(self, table: LedgerTable, approvals: ApprovalCheck) -> None:
        self.table = table
        self.sessions = SessionStore(table)
        self.approvals = approvals

    def verify(self, tool: str, event: Mapping[str, Any]) -> SealRefusal | None:
        envelope = event.get(ENVELOPE_FIELD)
        if envelope is None:
            return SealRefusal(SealCode.ENVELOPE_MISSING, None)
        if not _well_formed(envelope):
            return SealRefusal(SealCode.ENVELOPE_MALFORMED, None)
        jti = envelope["jti"]
        code = self._check(tool, event, envelope)
        if code is None and not self._claim(jti, envelope["expiraEm"]):
            code = SealCode.REPLAYED
        return None if code is None else SealRefusal(code, jti)

    def _check(self, tool: str, event: Mapping[str, Any], envelope: dict[str, Any]) -> SealCode | None:
        session = self.sessions.read_session(envelope["sessao"])
        if session is None or session.state != "aberta":
            return SealCode.SESSION_NOT_OPEN
        if self.table.now_ms() >= min(session.expires_at_ms, envelope["expiraEm"]):
            return SealCode.EXPIRED
        if not signed(session, envelope):
            return SealCode.BAD_SIGNATURE
        return self._policy(tool, event, envelope, session)

    def _policy(self, tool: str, event: Mapping[str, Any], envelope: dict[str, Any],
                session: SessionRecord) -> SealCode | None:
        arguments = call_arguments(event)
        if envelope["ferramenta"] != tool or tool not in session.tools:
            return SealCode.TOOL_NOT_ALLOWED
        if canonical_arguments(arguments)[1] != envelope["argsSha256"]:
            return SealCode.ARGUMENTS_CHANGED
        if not (envelope["conversaId"] == session.conversation_id == event.get("conversaId")):
            return SealCode.WRONG_CONVERSATION
        if not (envelope["clienteId"] == session.customer_id == event.get("clienteId")):
            return SealCode.WRONG_CUSTOMER
        if tool == REFUND_TOOL and _amount(arguments) > session.limits.refund_max_without_approval:
            approval = envelope.get(APPROVAL_FIELD)
            if approval is None:
                return SealCode.ABOVE_LIMIT
            return self.approvals(approval, session.conversation_id, tool, arguments)
        return None

    def _claim(self, jti: str, expires_at_ms: int) -> bool:
        try:
            self.table.put_new({"pk": "jti#" + checked_id(jti), "tipo": "jti", "usadoEm": self.table.iso(),
                                TTL_ATTRIBUTE: expires_at_ms // 1000 + JTI_KEPT_S})
        except ClientError as err:
            if condition_failed(err):
                return False
            raise
        except ValueError:
            return False
        return True


def signed(session: SessionRecord, envelope: dict[str, Any]) -> bool:
    try:
        signature = base64.b64decode(envelope["assinatura"], validate=True)
        session.verifier().verify(signature, _message(envelope))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def _amount(arguments: Mapping[str, Any]) -> Decimal:
    value = arguments.get(REFUND_AMOUNT_FIELD)
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return Decimal("Infinity")  # no readable amount: treated as above any limit
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return Decimal("Infinity")


def ledger_approvals(ledger: Any) -> ApprovalCheck:
    """The approval check over the ledger: ``approval_use.usability`` — the named request
    binds exactly this conversation, tool and arguments (the tool version is the
    confirmation gate's check, the release being the orchestrator's), is approved (or
    already handed to this call: consumed) and unexpired, AND the person's decision record
    (``decisao#``, which only the decision role writes) approves exactly it."""
    from .approval_use import Usability, usability
    from .approvals import ApprovalStore

    store = ApprovalStore(ledger)
    codes = {Usability.NOT_BINDING: SealCode.APPROVAL_NOT_BINDING, Usability.NOT_USABLE: SealCode.APPROVAL_NOT_USABLE}

    def check(approval: str, conversation_id: str, tool: str, arguments: dict[str, Any]) -> SealCode | None:
        try:
            record = store.get(approval)
        except ValueError:
            record = None
        answer = usability(ledger, record, conversation_id=conversation_id, tool=tool,
                           arguments_sha256=canonical_arguments(arguments)[1])
        return codes.get(answer)

    return check

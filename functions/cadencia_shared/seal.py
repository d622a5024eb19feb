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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import IntEnum
from typing import Any

from botocore.exceptions import ClientError
from cryptography.exceptions import InvalidSignature

from .approval_arguments import canonical_arguments
from .ledger.sessions import SessionRecord, SessionStore
from .ledger.table import TTL_ATTRIBUTE, LedgerTable, checked_id, condition_failed

# The envelope's format and the signing side: seal_envelope (re-exported here).
from .seal_envelope import APPROVAL_FIELD as APPROVAL_FIELD
from .seal_envelope import ENVELOPE_FIELD as ENVELOPE_FIELD
from .seal_envelope import ENVELOPE_TTL_MS as ENVELOPE_TTL_MS
from .seal_envelope import IDENTITY_FIELDS as IDENTITY_FIELDS
from .seal_envelope import SIGNED_FIELDS as _FIELDS
from .seal_envelope import VERSION as VERSION
from .seal_envelope import call_arguments as call_arguments
from .seal_envelope import seal as seal
from .seal_envelope import signed_message as _message

REFUND_TOOL = "emitir_reembolso"
REFUND_AMOUNT_FIELD = "valor"
JTI_KEPT_S = 24 * 3600


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


def _well_formed(envelope: Any) -> bool:
    if not isinstance(envelope, dict) or envelope.get("v") != VERSION:
        return False
    texts = ("sessao", "jti", "ferramenta", "argsSha256", "conversaId", "assinatura")
    numbers = ("clienteId", "emitidoEm", "expiraEm")
    # A conversation id may be 256 characters (cadencia_shared.models.CONVERSATION_ID_PATTERN).
    if any(not isinstance(envelope.get(k), str) or not envelope[k]
           or len(envelope[k]) > (256 if k == "conversaId" else 200) for k in texts):
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


def no_approvals(_approval: str, _conversation_id: str, _tool: str, _arguments: dict[str, Any]) -> SealCode:
    """For a tool with no approval policy: an envelope naming an approval binds nothing."""
    return SealCode.APPROVAL_NOT_BINDING


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
        amount = Decimal(str(value))
    except InvalidOperation:
        return Decimal("Infinity")
    # NaN (Python's json reads it) would make the comparison raise: no readable amount either.
    return amount if amount.is_finite() else Decimal("Infinity")

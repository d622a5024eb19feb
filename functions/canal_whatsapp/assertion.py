"""The ingress's assertion on what it enqueues (docs/decisions/queue-assertion.md).

The consumer takes the customer, the conversation and the reply address from the
queue message's body, so a body is only believed when the ingress vouches for it:
after verifying Meta's signature, the ingress adds ``emitidoEm`` (issued at, Unix
seconds) and ``assercao``, the hex HMAC-SHA256 of the canonical bytes of every
other field (sorted keys, compact JSON, ASCII), keyed with the queue key (a
secret only the ingress and the consumer can read). The consumer verifies before
anything runs and reads the fields from the verified object, never from the raw
text again.

``verify`` answers the fields or a typed ``Refusal``; its reasons carry no value of
the body (they are logged and counted).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import TypeAdapter, ValidationError

ASSERTION = "assercao"
ISSUED_AT = "emitidoEm"
_ANY_JSON: TypeAdapter[Any] = TypeAdapter(Any)
CLOCK_SKEW_S = 300  # an issue time this far in the future is still the ingress's clock, not a forgery
_HEX = re.compile(r"\A[0-9a-f]{64}\Z")


class Refusal(StrEnum):
    NOT_AN_OBJECT = "nao_e_objeto"
    MISSING = "sem_assercao"
    MALFORMED = "assercao_malformada"
    NO_ISSUE_TIME = "sem_emissao"
    MISMATCH = "assercao_invalida"  # another key, or any field altered, added or removed
    STALE = "expirada"
    FUTURE = "emitida_no_futuro"


def canonical(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _mac(fields: Mapping[str, Any], key: str) -> str:
    if not key:
        raise ValueError("the queue key is empty: nothing is signed or believed without it")
    return hmac.new(key.encode(), canonical(fields), hashlib.sha256).hexdigest()


def sign(fields: Mapping[str, Any], key: str, issued_at_s: int) -> str:
    """The queue body: ``fields`` with ``emitidoEm`` and the assertion over both."""
    if ASSERTION in fields or ISSUED_AT in fields:
        raise ValueError("the body already names the assertion's own fields")
    claimed = {**fields, ISSUED_AT: int(issued_at_s)}
    return json.dumps({**claimed, ASSERTION: _mac(claimed, key)}, separators=(",", ":"))


def verify(body: str | bytes, key: str, *, now_s: float, max_age_s: int) -> dict[str, Any] | Refusal:
    """The signed fields (without ``emitidoEm`` and the assertion), or why they are refused."""
    try:
        # pydantic's parser bounds nesting (json.loads raises RecursionError on a deep body).
        parsed = _ANY_JSON.validate_json(body)
    except (ValidationError, ValueError):
        return Refusal.NOT_AN_OBJECT
    if not isinstance(parsed, dict):
        return Refusal.NOT_AN_OBJECT
    claimed = dict(parsed)
    assertion = claimed.pop(ASSERTION, None)
    if assertion is None:
        return Refusal.MISSING
    if not isinstance(assertion, str) or not _HEX.match(assertion):
        return Refusal.MALFORMED
    issued = claimed.get(ISSUED_AT)
    if type(issued) is not int:
        return Refusal.NO_ISSUE_TIME
    if not hmac.compare_digest(_mac(claimed, key), assertion):
        return Refusal.MISMATCH
    if now_s - issued > max_age_s:
        return Refusal.STALE
    if issued - now_s > CLOCK_SKEW_S:
        return Refusal.FUTURE
    del claimed[ISSUED_AT]
    return claimed

"""The webhook's signature: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256>`` of
the raw request body, keyed with the Meta app's App Secret.

Verified over the bytes as received (never a re-serialized JSON), compared with
``hmac.compare_digest`` so the time taken says nothing about how much matched.
A replayed body with its valid signature verifies again: replays are absorbed by
the message-id dedupe (SQS FIFO + the ledger), not here.
"""

from __future__ import annotations

import hashlib
import hmac
import re

HEADER = "x-hub-signature-256"
_FORMAT = re.compile(r"\Asha256=([0-9a-f]{64})\Z")


def sign(body: bytes, app_secret: str) -> str:
    """The header value Meta sends for ``body`` (the local fake signs with it)."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def is_valid(body: bytes, header: str | None, app_secret: str) -> bool:
    if not header or not app_secret:
        return False
    match = _FORMAT.match(header.strip().lower())
    if match is None:  # missing prefix, another algorithm (sha1=…), wrong length
        return False
    expected = hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, match.group(1))

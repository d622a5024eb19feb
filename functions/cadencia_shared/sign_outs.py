"""Console sessions their person ended: a signed-out token decides nothing more.

The authorizer checks a token's signature and expiry, nothing else, and signing out
clears the cookie in one browser only: a copy of the token taken before (with its CSRF
token, derived from it) would still decide until it expires. So sign-out records the
token's signature's SHA-256 in the ledger (``saida-console#…``, kept past any token's
life by the table's TTL; no personal data), and every request that acts as a person — the
console's pages, the decision function's JSON API and the person's-reply API, where the
same token may come in the Authorization header — reads it first (one strongly consistent
GetItem). Shared by the decision function (writes and reads) and the person's reply (reads).

The record is keyed by the signature's bytes, not the token's text: base64url leaves
slack bits in the last character, so one signature has several spellings that all
verify, and a respelled copy must still be the signed-out token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from .dynamo_types import serialize_item
from .identity import IdentityRefused
from .ledger import Ledger
from .ledger.table import TTL_ATTRIBUTE

PREFIX = "saida-console#"
ITEM_TYPE = "saida_console"
KEPT_S = 2 * 3600  # longer than an access token lives (one hour)


def _pk(token: str) -> str:
    signature = token.rsplit(".", 1)[-1]
    try:
        raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    except (binascii.Error, ValueError):
        raw = token.encode()  # not a JWT's shape: no authorizer let it through; keyed by its text
    return PREFIX + hashlib.sha256(raw).hexdigest()


def record_sign_out(ledger: Ledger, token: str) -> None:
    now = ledger.now_ms()
    item = {"pk": _pk(token), "tipo": ITEM_TYPE, "encerradaEm": ledger.table.iso(now),
            TTL_ATTRIBUTE: now // 1000 + KEPT_S}
    ledger.client.put_item(TableName=ledger.table_name, Item=serialize_item(item))


def signed_out(ledger: Ledger, token: str) -> bool:
    return ledger.table.get(_pk(token)) is not None


def bearer_token(event: dict[str, Any]) -> str | None:
    """The Authorization header's token, with or without ``Bearer`` (API Gateway's JWT
    authorizer accepts both)."""
    header = (event.get("headers") or {}).get("authorization")
    if not isinstance(header, str):
        return None
    token = header[7:] if header[:7].lower() == "bearer " else header
    return token.strip() or None


def refuse_signed_out(ledger: Ledger, token: str | None) -> None:
    """Raise ``IdentityRefused(401, "sessao_encerrada")`` when ``token``'s session was ended."""
    if token is not None and signed_out(ledger, token):
        raise IdentityRefused(401, "sessao_encerrada")

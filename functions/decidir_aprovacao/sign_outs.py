"""Console sessions their person ended: a signed-out token decides nothing more.

The authorizer checks a token's signature and expiry, nothing else, and signing out
clears the cookie in one browser only: a copy of the token taken before (with its CSRF
token, derived from it) would still decide until it expires. So sign-out records the
token's SHA-256 in the ledger (``saida-console#…``, kept past any token's life by the
table's TTL; no personal data) and every console request reads it first (one strongly
consistent GetItem).
"""

from __future__ import annotations

import hashlib

from cadencia_shared.dynamo_types import serialize_item
from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.table import TTL_ATTRIBUTE

PREFIX = "saida-console#"
ITEM_TYPE = "saida_console"
KEPT_S = 2 * 3600  # longer than an access token lives (one hour)


def _pk(token: str) -> str:
    return PREFIX + hashlib.sha256(token.encode()).hexdigest()


def record_sign_out(ledger: Ledger, token: str) -> None:
    now = ledger.now_ms()
    item = {"pk": _pk(token), "tipo": ITEM_TYPE, "encerradaEm": ledger.table.iso(now),
            TTL_ATTRIBUTE: now // 1000 + KEPT_S}
    ledger.client.put_item(TableName=ledger.table_name, Item=serialize_item(item))


def signed_out(ledger: Ledger, token: str) -> bool:
    return ledger.table.get(_pk(token)) is not None

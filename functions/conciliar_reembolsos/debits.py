"""What the gateway says it debited: the adapter the books' audit reads.

A gateway that can list its refunds plugs in through ``DebitListing`` (one method:
the debits since some time ago, by ``Idempotency-Key`` as sent on the wire). The
local gateway lists them at ``GET /v1/debitos``; a real gateway's report (Stripe's
``GET /v1/refunds``, a settlement file) gets its own small class with the same
method. With no listing configured (``GATEWAY_LISTS_DEBITS=false``, the deployed
default until one is written) the audit compares the ERP and the ledger only and
says the gateway was not judged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

import urllib3

MAX_LISTED = 100_000  # a bound on one listing; beyond it the answer is refused, not trusted


@dataclass(frozen=True)
class GatewayDebit:
    wire_key: str  # the Idempotency-Key as the gateway received it
    order_id: str
    amount: Decimal


class DebitListing(Protocol):
    def debits(self, *, since_s: int) -> list[GatewayDebit]:
        """Every debit of the last ``since_s`` seconds (more is fine, fewer is not)."""
        ...


class DebitListingError(RuntimeError):
    pass


@dataclass
class HttpDebitListing:
    """``GET {base_url}/v1/debitos`` with the gateway's bearer token (the local gateway)."""

    base_url: str
    timeout_s: float
    read_token: Callable[[], str]

    def debits(self, *, since_s: int) -> list[GatewayDebit]:
        http = urllib3.PoolManager()
        try:
            resp = http.request("GET", f"{self.base_url}/v1/debitos?desdeS={int(since_s)}",
                                headers={"Authorization": f"Bearer {self.read_token()}"},
                                timeout=self.timeout_s, retries=False)
        except urllib3.exceptions.HTTPError as err:
            raise DebitListingError(type(err).__name__) from None
        if resp.status != 200:
            raise DebitListingError(f"HTTP {resp.status}")
        try:
            listed = json.loads(resp.data)["debitos"]
            if not isinstance(listed, list) or len(listed) > MAX_LISTED:
                raise DebitListingError("listagem inválida")
            return [GatewayDebit(str(d["idempotencyKey"]), str(d["pedidoId"]), Decimal(str(d["valor"])))
                    for d in listed]
        except (ValueError, KeyError, TypeError, ArithmeticError) as err:
            raise DebitListingError(f"listagem inválida: {type(err).__name__}") from None

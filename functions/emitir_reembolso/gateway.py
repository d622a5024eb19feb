"""HTTP client of the payment gateway (the only code that moves money).

The gateway honours ``Idempotency-Key`` like Stripe: the same key returns the
same refund and never debits twice; the same key with another amount is an error.
Failures are classified by what they say about the debit, because that decides
what may happen next:

- ``GatewayNotReached``: nothing was sent (connection refused, connect timeout)
  -> the claim may be retaken;
- ``GatewayOutcomeUnknown``: sent, no definitive answer (read timeout, 5xx, reset,
  409 in flight, any status other than 200/201/402 and 4xx, or a body whose status
  contradicts the HTTP status: a 402 saying ``aprovado``, a 2xx saying ``recusado``)
  -> reconcile by key before anyone answers;
- ``GatewayRejected``: a definitive 4xx for *this request* (bad credential,
  key reused with another amount) -> nothing was debited by it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import urllib3
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ProtocolError, ReadTimeoutError


class GatewayNotReached(Exception):
    pass


class GatewayOutcomeUnknown(Exception):
    pass


class GatewayRejected(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"gateway rejected the request: HTTP {status} {code}")
        self.status = status
        self.code = code


@dataclass(frozen=True)
class GatewayRefund:
    transaction_id: str
    status: str  # "aprovado" | "recusado"
    amount: Decimal
    order_id: str
    created_at: str
    replayed: bool = False  # the gateway answered from its idempotency record

    @property
    def approved(self) -> bool:
        return self.status == "aprovado"

    @property
    def declined(self) -> bool:
        return self.status == "recusado"


WIRE_KEY_MAX = 255  # Stripe's limit on an Idempotency-Key
WIRE_KEY_DIGEST_PREFIX = "reembolso-sha256-"


def wire_idempotency_key(key: str) -> str:
    """The ``Idempotency-Key`` sent for a ledger key: the key itself when it fits
    the gateway's 255 characters (every ordinary id: Lab 87's format unchanged on
    the wire), else a SHA-256 digest of it (81 characters). Deterministic, so a
    re-send uses the same key; injective in practice, because a ledger key always
    contains ``#`` and a digest key never does, and SHA-256 does not collide.
    (Capping the conversation id instead would also cap the channel's message ids,
    which share that pattern.)"""
    if len(key) <= WIRE_KEY_MAX:
        return key
    return WIRE_KEY_DIGEST_PREFIX + hashlib.sha256(key.encode()).hexdigest()


ERROR_CODE_MAX = 80  # characters of the gateway's ``erro`` kept (stored, logged)


def _clip(code: object) -> str:
    """The ``erro`` code as the client keeps it: a str, at most ERROR_CODE_MAX characters."""
    text = code if isinstance(code, str) else repr(code)
    if len(text) <= ERROR_CODE_MAX and text.isprintable():
        return text
    return repr(text[:ERROR_CODE_MAX])[: ERROR_CODE_MAX + 2] + "…"


def _consistent(http_status: int, refund: GatewayRefund) -> bool:
    """A final status in the body must agree with the HTTP status: approved only
    with 200/201, declined only with 402. (A non-final status is left to the
    refund's logic, which holds it.)"""
    if refund.approved:
        return http_status in (200, 201)
    if refund.declined:
        return http_status == 402
    return True


class PaymentGatewayClient:
    def __init__(self, base_url: str, timeout_s: float, http: urllib3.PoolManager | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        # ``total`` bounds each request end to end, so a debit plus a lookup fit the
        # function's timeout (8 s) with the default 3 s.
        self.timeout = urllib3.Timeout(connect=min(timeout_s, 1.0), read=timeout_s, total=timeout_s)
        self.http = http or urllib3.PoolManager(retries=False)

    def refund(self, *, idempotency_key: str, order_id: str, amount: Decimal, token: str) -> GatewayRefund:
        body = json.dumps({"pedidoId": order_id, "valor": str(amount), "moeda": "BRL"})
        resp = self._request(
            "POST",
            "/v1/reembolsos",
            token=token,
            body=body,
            headers={"Idempotency-Key": wire_idempotency_key(idempotency_key), "Content-Type": "application/json"},
        )
        if resp.status in (200, 201, 402):  # 402: declined, a definitive outcome
            refund = self._refund(resp)
            if not _consistent(resp.status, refund):
                # A 402 saying "aprovado" may have debited; a 2xx saying "recusado"
                # may not have. Neither is definitive: hold, never release nor apply.
                raise GatewayOutcomeUnknown(f"HTTP {resp.status} com status {refund.status[:40]!r}")
            return refund
        raise self._classify(resp)

    def lookup(self, *, idempotency_key: str, token: str) -> GatewayRefund | None:
        query = quote(wire_idempotency_key(idempotency_key), safe="")
        resp = self._request("GET", f"/v1/reembolsos?idempotencyKey={query}", token=token)
        if resp.status == 200:
            return self._refund(resp)
        if resp.status == 404:
            return None
        raise self._classify(resp)

    # -- internals ----------------------------------------------------------
    def _request(self, method: str, path: str, *, token: str, body: str | None = None,
                 headers: dict[str, str] | None = None) -> Any:
        try:
            return self.http.request(
                method,
                self.base_url + path,
                body=body,
                headers={"Authorization": f"Bearer {token}", **(headers or {})},
                timeout=self.timeout,
                retries=False,
            )
        except (NewConnectionError, ConnectTimeoutError) as err:
            raise GatewayNotReached(type(err).__name__) from None
        except (ReadTimeoutError, ProtocolError) as err:
            raise GatewayOutcomeUnknown(type(err).__name__) from None

    @staticmethod
    def _refund(resp: Any) -> GatewayRefund:
        data = json.loads(resp.data)
        return GatewayRefund(
            transaction_id=data["id"],
            status=data["status"],
            amount=Decimal(data["valor"]),
            order_id=data["pedidoId"],
            created_at=data["criadoEm"],
            replayed=resp.headers.get("Idempotent-Replayed") == "true",
        )

    @staticmethod
    def _classify(resp: Any) -> Exception:
        # Only a 4xx proves this request moved nothing. 409 is the key still in
        # flight; a 5xx, or any status this client does not expect (202 Accepted
        # "will be processed", 204, a 3xx), leaves the outcome unknown.
        if not 400 <= resp.status < 500 or resp.status == 409:
            return GatewayOutcomeUnknown(f"HTTP {resp.status}")
        try:
            code = json.loads(resp.data).get("erro", "desconhecido")
        except (ValueError, AttributeError):  # not JSON, or JSON but not an object
            code = "desconhecido"
        # The gateway's text is stored in the claim's ``detalhe`` and may be logged:
        # keep a short repr (quoted, control characters escaped), never the whole body.
        return GatewayRejected(resp.status, _clip(code))

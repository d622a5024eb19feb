"""HTTP client of the payment gateway (the only code that moves money).

The gateway honours ``Idempotency-Key`` like Stripe: the same key returns the
same refund and never debits twice; the same key with another amount is an error.
Failures are classified by what they say about the debit, because that decides
what may happen next:

- ``GatewayNotReached``: nothing was sent (connection refused, connect timeout)
  -> the claim may be retaken;
- ``GatewayOutcomeUnknown``: sent, no definitive answer (read timeout, 5xx, reset,
  409 in flight, any status other than 200/201/402 and 4xx) -> reconcile by key
  before anyone answers;
- ``GatewayRejected``: a definitive 4xx for *this request* (bad credential,
  key reused with another amount) -> nothing was debited by it.
"""

from __future__ import annotations

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
    def __init__(self, status: int, codigo: str) -> None:
        super().__init__(f"gateway rejected the request: HTTP {status} {codigo}")
        self.status = status
        self.codigo = codigo


@dataclass(frozen=True)
class GatewayRefund:
    transacao: str
    status: str  # "aprovado" | "recusado"
    valor: Decimal
    pedido_id: str
    criado_em: str
    replayed: bool = False  # the gateway answered from its idempotency record

    @property
    def approved(self) -> bool:
        return self.status == "aprovado"

    @property
    def declined(self) -> bool:
        return self.status == "recusado"


class PaymentGatewayClient:
    def __init__(self, base_url: str, timeout_s: float, http: urllib3.PoolManager | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        # ``total`` bounds each request end to end, so a debit plus a lookup fit the
        # function's timeout (8 s) with the default 3 s.
        self.timeout = urllib3.Timeout(connect=min(timeout_s, 1.0), read=timeout_s, total=timeout_s)
        self.http = http or urllib3.PoolManager(retries=False)

    def refund(self, *, idempotency_key: str, pedido_id: str, valor: Decimal, token: str) -> GatewayRefund:
        body = json.dumps({"pedidoId": pedido_id, "valor": str(valor), "moeda": "BRL"})
        resp = self._request(
            "POST",
            "/v1/reembolsos",
            token=token,
            body=body,
            headers={"Idempotency-Key": idempotency_key, "Content-Type": "application/json"},
        )
        if resp.status in (200, 201, 402):  # 402: declined, a definitive outcome
            return self._refund(resp)
        raise self._classify(resp)

    def lookup(self, *, idempotency_key: str, token: str) -> GatewayRefund | None:
        resp = self._request("GET", f"/v1/reembolsos?idempotencyKey={quote(idempotency_key, safe='')}", token=token)
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
            transacao=data["id"],
            status=data["status"],
            valor=Decimal(data["valor"]),
            pedido_id=data["pedidoId"],
            criado_em=data["criadoEm"],
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
            codigo = json.loads(resp.data).get("erro", "desconhecido")
        except ValueError:
            codigo = "desconhecido"
        return GatewayRejected(resp.status, codigo)

"""A payment gateway on loopback that behaves like a real one where it matters.

- ``Authorization: Bearer <token>`` is required on every ``/v1`` call;
- ``POST /v1/reembolsos`` honours ``Idempotency-Key`` the way Stripe does: the same
  key and body return the stored refund (``Idempotent-Replayed: true``) and never
  debit again; the same key with another amount is ``422 idempotency_key_reutilizada``;
  a key still being processed is ``409``; a key longer than 255 characters is
  ``400 idempotency_key_longa`` (Stripe's limit);
- ``GET /v1/reembolsos?idempotencyKey=K`` looks a refund up by key. It answers 404
  while the key is still in flight, as it does for a key never seen: a lookup sees
  only finished requests, so "not found" never proves "never sent". Stripe itself
  has no lookup by idempotency key (only the POST replay), so the refund logic
  never decides on a 404; it re-sends the same POST;
- every *real* debit is recorded (memory + a JSONL file): this is what the
  harness counts, never what the orchestrator believes happened; ``GET /v1/debitos``
  (bearer) lists them, as a real gateway's report of refunds would, for the books' audit;
- faults are injectable through ``POST /_admin/falhas`` so tests can produce
  the ambiguous cases (latency, 500 before or after the debit, a read timeout
  after the debit, a decline, a failing lookup).

The ``/_admin`` endpoints are test controls and exist only on this local server.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

IDEMPOTENCY_KEY_MAX = 255  # Stripe's limit on an Idempotency-Key (characters)

FAULT_MODES = {
    "latencia",  # sleep atraso_s, then behave normally
    "processamento_lento",  # hold the key in flight for atraso_s (or until released), then debit (409 meanwhile)
    "erro_500",  # 500 without debiting
    "erro_500_apos_debito",  # debit, then answer 500 (the client cannot know)
    "timeout_apos_debito",  # debit, then stall past the client's read timeout
    "recusar",  # decline (402), a definitive outcome
    "consulta_erro_500",  # the lookup by key answers 500 (consumed by lookups only)
}
LOOKUP_FAULTS = {"consulta_erro_500"}


@dataclass
class Fault:
    mode: str
    times: int = 1
    delay_s: float = 0.0


@dataclass
class GatewayState:
    token: str
    debits_file: Path | None = None
    refunds: dict[str, dict[str, Any]] = field(default_factory=dict)  # by idempotency key
    in_flight: set[str] = field(default_factory=set)
    debits: list[dict[str, Any]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=lambda: {"reembolso": 0, "consulta": 0, "nao_autorizado": 0})
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Ends every held "processamento_lento" now (/_admin/liberar): a test holds a key in
    # flight for as long as it needs, instead of guessing a delay a loaded machine outlasts.
    released: threading.Event = field(default_factory=threading.Event)

    def next_fault(self, *, lookup: bool = False) -> Fault | None:
        """The next injected fault for this kind of call (refunds and lookups queue apart)."""
        with self.lock:
            for index, fault in enumerate(self.faults):
                if (fault.mode in LOOKUP_FAULTS) == lookup:
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.pop(index)
                    return Fault(fault.mode, 1, fault.delay_s)
            return None

    def record_debit(self, refund: dict[str, Any]) -> None:
        debit = {**refund, "debitadoEm": _now()}
        self.debits.append(debit)
        if self.debits_file is not None:
            with self.debits_file.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(debit, ensure_ascii=False) + "\n")

    def reset(self) -> None:
        with self.lock:
            self.refunds.clear()
            self.in_flight.clear()
            self.debits.clear()
            self.faults.clear()
            self.released.set()  # nothing stays held past a reset (the next hold clears it)
            for k in self.calls:
                self.calls[k] = 0
            if self.debits_file is not None:
                self.debits_file.write_text("", encoding="utf-8")


@dataclass(frozen=True)
class _Answer:
    status: int
    body: Any
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class _RefundRequest:
    key: str
    amount: Decimal
    order_id: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Handler(BaseHTTPRequestHandler):
    server_version = "CadenciaGatewayLocal/1.0"
    state: GatewayState  # set on the subclass made by make_server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the harness prints its own
        pass

    # -- plumbing -------------------------------------------------------------
    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        return json.loads(self.rfile.read(length))

    def _authorized(self) -> bool:
        expected = f"Bearer {self.state.token}"
        if secrets.compare_digest(self.headers.get("Authorization", ""), expected):
            return True
        with self.state.lock:
            self.state.calls["nao_autorizado"] += 1
        self._send(401, {"erro": "nao_autorizado"})
        return False

    # -- routes -----------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        url = urlparse(self.path)
        if url.path == "/_admin/debitos":
            return self._send(200, list(self.state.debits))
        if url.path == "/_admin/estatisticas":
            with self.state.lock:
                return self._send(200, {**self.state.calls, "debitos": len(self.state.debits)})
        if url.path == "/_admin/saude":
            return self._send(200, {"ok": True})
        if url.path == "/v1/debitos":  # the debits made, for the books' audit (bearer, like /v1)
            if not self._authorized():
                return None
            with self.state.lock:
                listed = [{k: d[k] for k in ("idempotencyKey", "pedidoId", "valor", "debitadoEm")}
                          for d in self.state.debits]
            return self._send(200, {"debitos": listed})
        if url.path == "/v1/reembolsos":
            if not self._authorized():
                return None
            with self.state.lock:
                self.state.calls["consulta"] += 1
            if self.state.next_fault(lookup=True):
                return self._send(500, {"erro": "falha_interna"})
            key = (parse_qs(url.query).get("idempotencyKey") or [""])[0]
            with self.state.lock:
                refund = self.state.refunds.get(key)
            if refund is None:
                return self._send(404, {"erro": "nao_encontrado"})
            return self._send(200, refund)
        return self._send(404, {"erro": "rota_inexistente"})

    def do_POST(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        if url.path == "/_admin/falhas":
            body = self._body()
            if body.get("modo") not in FAULT_MODES:
                return self._send(400, {"erro": "modo_invalido", "modos": sorted(FAULT_MODES)})
            with self.state.lock:
                self.state.faults.append(
                    Fault(body["modo"], int(body.get("vezes", 1)), float(body.get("atraso_s", 0)))
                )
                if body["modo"] == "processamento_lento":
                    self.state.released.clear()
            return self._send(200, {"ok": True})
        if url.path == "/_admin/liberar":
            self.state.released.set()
            return self._send(200, {"ok": True})
        if url.path == "/_admin/reset":
            self.state.reset()
            return self._send(200, {"ok": True})
        if url.path == "/v1/reembolsos":
            return self._refund()
        return self._send(404, {"erro": "rota_inexistente"})

    def _refund(self) -> None:
        if not self._authorized():
            return
        with self.state.lock:
            self.state.calls["reembolso"] += 1
        answer = self._refund_answer()
        self._send(answer.status, answer.body, answer.headers)

    # -- a refund, step by step (each step may end the request with its answer) ------
    def _refund_answer(self) -> _Answer:
        request = self._refund_request()
        if isinstance(request, _Answer):
            return request
        fault = self.state.next_fault()
        mode = fault.mode if fault else None
        if mode == "latencia":
            time.sleep(fault.delay_s)
        if mode == "erro_500":
            return _Answer(500, {"erro": "falha_interna"})
        replayed = self._replay_or_take_the_key(request)
        if replayed is not None:
            return replayed
        refund = self._process(request, fault)
        if mode == "erro_500_apos_debito":
            return _Answer(500, {"erro": "falha_interna"})
        if mode == "timeout_apos_debito":
            time.sleep(fault.delay_s or 10)
        return _Answer(402 if refund["status"] == "recusado" else 201, refund)

    def _refund_request(self) -> _RefundRequest | _Answer:
        key = self.headers.get("Idempotency-Key", "")
        if not key:
            return _Answer(400, {"erro": "idempotency_key_ausente"})
        if len(key) > IDEMPOTENCY_KEY_MAX:  # as Stripe: a longer key is a 400, nothing debited
            return _Answer(400, {"erro": "idempotency_key_longa"})
        try:
            body = self._body()
            amount = Decimal(str(body["valor"]))
            order_id = str(body["pedidoId"])
        except (ValueError, KeyError, TypeError, InvalidOperation):
            return _Answer(400, {"erro": "corpo_invalido"})
        if amount <= 0 or amount != amount.quantize(Decimal("0.01")):
            return _Answer(400, {"erro": "valor_invalido"})
        return _RefundRequest(key, amount, order_id)

    def _replay_or_take_the_key(self, request: _RefundRequest) -> _Answer | None:
        """The stored answer for a finished key (422 for another body), 409 for a key in flight;
        otherwise None, with the key now in flight for this request."""
        with self.state.lock:
            existing = self.state.refunds.get(request.key)
            if existing is None and request.key in self.state.in_flight:
                return _Answer(409, {"erro": "requisicao_em_andamento"})
            if existing is not None:
                if Decimal(existing["valor"]) != request.amount or existing["pedidoId"] != request.order_id:
                    return _Answer(422, {"erro": "idempotency_key_reutilizada"})
                status = 402 if existing["status"] == "recusado" else 200
                return _Answer(status, existing, {"Idempotent-Replayed": "true"})
            self.state.in_flight.add(request.key)
            return None

    def _process(self, request: _RefundRequest, fault: Fault | None) -> dict[str, Any]:
        """Decide and store the refund (a real debit unless declined); frees the key."""
        try:
            if fault and fault.mode == "processamento_lento":
                self.state.released.wait(fault.delay_s)  # the key stays in flight: a POST meanwhile gets 409
            refund = {
                "id": "rb_" + secrets.token_hex(8),
                "status": "recusado" if fault and fault.mode == "recusar" else "aprovado",
                "pedidoId": request.order_id,
                "valor": str(request.amount),
                "moeda": "BRL",
                "idempotencyKey": request.key,
                "criadoEm": _now(),
            }
            with self.state.lock:
                self.state.refunds[request.key] = refund
                if refund["status"] == "aprovado":
                    self.state.record_debit(refund)
            return refund
        finally:
            with self.state.lock:
                self.state.in_flight.discard(request.key)


def make_server(host: str, port: int, state: GatewayState) -> ThreadingHTTPServer:
    handler = type("GatewayHandler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server

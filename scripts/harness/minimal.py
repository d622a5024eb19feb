"""Lab 87's Figure 1, kept on purpose as the baseline: what NOT to deploy.

One broad identity does everything (the ERP admin connection, the gateway
secret read with ``secretsmanager:GetSecretValue`` on ``*``), there is no retry
ceiling and no idempotency: every refund call the model makes is a new
``Idempotency-Key`` at the gateway, so every call debits. Only the model giving
up, or the model platform's own turn limit (``limite_plataforma`` model calls
per customer message, standing for Bedrock's internal timeout), stops a loop —
and a platform cut is not an application limit.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import psycopg

from cadencia_shared.ledger import ATTEMPT_EVENT
from emitir_reembolso.gateway import PaymentGatewayClient
from orchestrator import texts
from orchestrator.tools import definitions

from .records import record


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class MinimalAgent:
    sdk: Any
    model_id: str
    gateway: PaymentGatewayClient
    read_gateway_token: Callable[[], str]  # the broad role reads the secret whenever it likes
    erp_conninfo: str  # one admin connection for every tool
    platform_limit: int = 20
    records: list[dict[str, Any]] = field(default_factory=list)
    platform_cuts: set[str] = field(default_factory=set)
    _numbers: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def turn(self, conversation_id: str, customer_id: int, history: list[dict[str, Any]], text: str) -> tuple[str, str]:
        """One customer message; returns (reply, how it ended). ``history`` is extended in place."""
        history.append({"role": "user", "content": [{"type": "text", "text": text}]})
        for _ in range(self.platform_limit - 1):
            response = self.sdk.messages.create(model=self.model_id, max_tokens=1024, system=texts.SYSTEM_PROMPT,
                                                tools=definitions(strict=False), messages=history)
            content = [b.model_dump(mode="json", exclude_none=True) for b in response.content]
            history.append({"role": "assistant", "content": content})
            if response.stop_reason != "tool_use":
                return "\n".join(b.get("text", "") for b in content if b["type"] == "text"), "resposta"
            results = [self._run(conversation_id, customer_id, b) for b in content if b["type"] == "tool_use"]
            history.append({"role": "user", "content": results})
        # The platform's own limit cut the run; the application never decided anything.
        self.platform_cuts.add(conversation_id)
        return "", "cortada_pela_plataforma"

    def _run(self, conversation_id: str, customer_id: int, block: dict[str, Any]) -> dict[str, Any]:
        name, args = block["name"], block["input"]
        order_id = str(args.get("pedidoId", ""))
        self._numbers[(conversation_id, order_id, name)] += 1
        outcome, detail, body = "executado", None, {"ok": True}
        try:
            if name == "emitir_reembolso":
                # A fresh key on every call: exactly the missing idempotency of Figure 1.
                key = f"{conversation_id}#{order_id}#minima#{uuid.uuid4().hex[:12]}"
                refund = self.gateway.refund(idempotency_key=key, order_id=order_id,
                                             amount=Decimal(str(args["valor"])).quantize(Decimal("0.01")),
                                             token=self.read_gateway_token())
                body = {"ok": True, "resultado": "executado", "transacao": refund.transaction_id}
            elif name == "consultar_status_pedido":
                with psycopg.connect(self.erp_conninfo) as conn:
                    row = conn.execute("SELECT status FROM pedidos WHERE id = %s", (order_id,)).fetchone()
                body = {"ok": True, "status": row[0] if row else None}
            elif name == "atualizar_cadastro":
                body = {"ok": True, "resultado": "atualizado"}
        except Exception as err:  # the minimal design has no typed errors either
            outcome, detail, body = "erro_da_ferramenta", type(err).__name__, {"ok": False, "erro": str(err)}
        self.records.append(record(
            evento=ATTEMPT_EVENT, timestamp=_now(), arquitetura="minima", conversaId=conversation_id,
            pedidoId=order_id or None, ferramenta=name,
            tentativaNumero=self._numbers[(conversation_id, order_id, name)],
            resultado=outcome, chaveIdempotencia=None, detalhe=detail,
        ))
        return {"type": "tool_result", "tool_use_id": block["id"], "content": json.dumps(body),
                "is_error": not body["ok"]}

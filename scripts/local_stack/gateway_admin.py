"""Client of the local gateway's ``/_admin`` test controls (harness and tests).

Real debits are read here, from the gateway server itself: no conclusion about
money comes from what the orchestrator or a handler *believes* happened.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any


class GatewayAdmin:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def debits(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_admin/debitos")

    def stats(self) -> dict[str, int]:
        return self._call("GET", "/_admin/estatisticas")

    def reset(self) -> None:
        self._call("POST", "/_admin/reset", {})

    def inject(self, mode: str, *, times: int = 1, delay_s: float = 0.0) -> None:
        self._call("POST", "/_admin/falhas", {"modo": mode, "vezes": times, "atraso_s": delay_s})

    def release(self) -> None:
        """End every held ``processamento_lento`` now: its refunds are decided and debited."""
        self._call("POST", "/_admin/liberar", {})

    def wait_for_debit(self, key: str, timeout_s: float = 120) -> bool:
        """Whether ``key`` was debited within ``timeout_s`` (a bound, never a window to hit)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(d["idempotencyKey"] == key for d in self.debits()):
                return True
            time.sleep(0.05)
        return False

    def debits_for(self, prefix: str) -> list[dict[str, Any]]:
        return [d for d in self.debits() if d["idempotencyKey"].startswith(prefix)]

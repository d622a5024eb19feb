"""Building an orchestrator for tests: real ledger, scripted model, chosen invoker."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from cadencia_shared.catalog import ToolSpec
from cadencia_shared.ledger import Ledger
from orchestrator.controls import Control
from orchestrator.invokers import Invocation, InvocationStatus, ToolInvoker
from orchestrator.loop import Orchestrator
from orchestrator.model import model_client
from orchestrator.settings import OrchestratorSettings

from .anthropic_fake import ScriptedModel


class CountingInvoker:
    """Counts invocations per tool, then delegates (or answers a canned payload)."""

    def __init__(self, inner: ToolInvoker | None = None, answer: dict[str, Any] | None = None,
                 refunded: str = "0.00", order_amount: str = "9999999999.99") -> None:
        self.inner = inner
        self.answer = answer
        # What a canned status read says was refunded already (the confirmation
        # gate reads it before a refund); a canned ``answer`` for other tools keeps it.
        self.refunded = refunded
        # ...and the order's value (feasibility refuses an amount above value − refunded):
        # by default the largest amount a tool accepts, so no canned call is refused for it.
        self.order_amount = order_amount
        self.calls: Counter[str] = Counter()
        self.events: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, tool: ToolSpec, event: dict[str, Any]) -> Invocation:
        self.calls[tool.name] += 1
        self.events.append((tool.name, event))
        if self.inner is not None:
            return self.inner.invoke(tool, event)
        status_read = {"ok": True, "resultado": "consultado", "dados": {"valorPedido": self.order_amount,
                                                                     "valorReembolsado": self.refunded}}
        canned_for_another_tool = self.answer is not None and self.answer.get("ok") \
            and self.answer.get("resultado") != "consultado"
        if tool.name == "consultar_status_pedido" and (self.answer is None or canned_for_another_tool):
            return Invocation(InvocationStatus.OK, payload={**status_read, "ferramenta": tool.name})
        payload = self.answer or {"ferramenta": tool.name, "ok": True, "resultado": "consultado", "dados": {}}
        return Invocation(InvocationStatus.OK, payload={**payload, "ferramenta": tool.name})


# The protocol tests read the messages sent as the history holds them: no cache marks,
# unless a test asks for them (the caching itself: tests/test_model_cost_ratios.py,
# tests/test_prompt_caching_requests.py).
NO_CACHE_ENV = {"PROMPT_CACHE_PREFIX_TTL": "off", "PROMPT_CACHE_TTL": "off"}


def settings(**env: str) -> OrchestratorSettings:
    return OrchestratorSettings.from_env({"MODEL_PROVIDER": "anthropic", "TOOL_INVOKER": "local",
                                         "AWS_REGION": "us-east-1", **NO_CACHE_ENV, **env})


def build(model: ScriptedModel, ledger: Ledger, invoker: ToolInvoker, *,
          controls: Callable[[OrchestratorSettings], Sequence[Control]] | None = None,
          **env: str) -> tuple[Orchestrator, list[float]]:
    """``controls``: the chain to use instead of the default, built from the settings."""
    cfg = settings(**env)
    client = model_client(cfg, model.sdk())
    sleeps: list[float] = []
    client.sleep = sleeps.append  # backoff is recorded, never slept
    chain = None if controls is None else controls(cfg)
    return Orchestrator(settings=cfg, ledger=ledger, model=client, invoker=invoker, controls=chain), sleeps

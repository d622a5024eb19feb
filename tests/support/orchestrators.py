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

    def __init__(self, inner: ToolInvoker | None = None, answer: dict[str, Any] | None = None) -> None:
        self.inner = inner
        self.answer = answer
        self.calls: Counter[str] = Counter()
        self.events: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, tool: ToolSpec, event: dict[str, Any]) -> Invocation:
        self.calls[tool.name] += 1
        self.events.append((tool.name, event))
        if self.inner is not None:
            return self.inner.invoke(tool, event)
        payload = self.answer or {"ferramenta": tool.name, "ok": True, "resultado": "consultado", "dados": {}}
        return Invocation(InvocationStatus.OK, payload={**payload, "ferramenta": tool.name})


def settings(**env: str) -> OrchestratorSettings:
    return OrchestratorSettings.from_env({"MODEL_PROVIDER": "anthropic", "TOOL_INVOKER": "local",
                                         "AWS_REGION": "us-east-1", **env})


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

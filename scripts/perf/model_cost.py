"""What the model bills per customer message, with and without prompt caching.

Runs whole conversations through the real orchestrator (its loop, history, output
contract and controls, the real ``anthropic`` SDK) against the scripted model, whose
answers carry the Messages API's accounting (scripts/harness/prompt_cache.py: one
shared cache, the configured minimum cacheable length, an injected clock). Tools answer
canned payloads the size of the real ones (the tokens are the figure, not the tools).

Rhythm: customer messages ``gap_s`` apart (drawn per message from a seeded range),
each model call ``MODEL_LATENCY_S`` after the previous one. The baseline is the same
conversation with no ``cache_control`` (every input token billed at 1×).
"""

from __future__ import annotations

import heapq
import itertools
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2

from cadencia_shared.ledger import Ledger
from orchestrator.events import TurnRequest
from orchestrator.invokers import Invocation, InvocationStatus
from orchestrator.loop import Orchestrator
from orchestrator.model import Deadline, model_client
from orchestrator.settings import OrchestratorSettings
from scripts.harness.prompt_cache import PromptCache, billed_input
from scripts.harness.scenario import Scenario
from scripts.harness.scripted_model import InsistentPolicy

ROOT = Path(__file__).resolve().parents[2]
PROVA_SCENARIOS = ROOT / "scripts" / "cenarios" / "cenario-reformulacao-ambigua.jsonl"
MODEL_LATENCY_S = 3.0  # stated: one model call's wall time (a Sonnet-class tool call)
STATUS = "consultar_status_pedido"
_runs = itertools.count(1)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CannedTools:
    """Tool answers of the real shapes and sizes (no Lambda, no database)."""

    def invoke(self, tool: Any, event: dict[str, Any]) -> Invocation:
        order = str(event.get("pedidoId", "0"))
        if tool.name == STATUS:
            data = {"pedidoId": order, "status": "em_transporte", "valorPedido": "120.00",
                    "statusReembolso": None, "valorReembolsado": "0.00", "previsaoEntrega": "2026-12-09",
                    "codigoRastreio": "BR123456789BR"}
            payload = {"ferramenta": tool.name, "ok": True, "resultado": "consultado", "dados": data}
        else:
            payload = {"ferramenta": tool.name, "ok": True, "resultado": "executado",
                       "dados": {"pedidoId": order, "valor": str(event.get("valor", "0"))}}
        return Invocation(InvocationStatus.OK, payload=payload)


@dataclass
class Figures:
    messages: int = 0
    calls: int = 0
    input_tokens: int = 0  # everything the model read (input + cache read + cache write)
    billed: float = 0.0  # input-token equivalents at the input price
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    usages: list[dict[str, Any]] = field(default_factory=list)

    def add(self, usage: dict[str, Any]) -> None:
        self.calls += 1
        self.input_tokens += (usage["input_tokens"] + usage["cache_read_input_tokens"]
                              + usage["cache_creation_input_tokens"])
        self.billed += billed_input(usage)
        self.output_tokens += usage["output_tokens"]
        self.cache_read += usage["cache_read_input_tokens"]
        self.cache_write += usage["cache_creation_input_tokens"]
        self.usages.append(usage)


class AccountingModel:
    """The scripted policy behind the SDK, every answer accounted by ``cache``."""

    def __init__(self, cache: PromptCache, clock: Clock) -> None:
        self.cache, self.clock = cache, clock
        self.policy: InsistentPolicy | None = None
        self.figures = Figures()
        self.requests: list[dict[str, Any]] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.clock.now += MODEL_LATENCY_S
        assert self.policy is not None
        answer = self.policy.respond(body)
        usage = self.cache.account(body, answer["content"]).as_json()
        self.requests.append(body)
        self.figures.add(usage)
        return httpx2.Response(200, json={**answer, "usage": usage})

    def sdk(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key="local-accounting", max_retries=0,
                                   http_client=httpx2.Client(transport=httpx2.MockTransport(self.handler)))


def status_conversation(name: str, messages: int, customer: int = 8801) -> Scenario:
    """A customer asking about orders: every other message needs a status read (of an
    order of its own, so the retry ceiling never enters), the others a plain answer."""
    orders = [f"{8801 + i}" for i in range(messages)]
    return Scenario.model_validate({
        "conversaId": name, "clienteId": customer, "pedidoId": orders[0], "valorPedido": 120.0,
        "mensagens": [f"Oi! Qual o status do pedido {orders[i]}?" if i % 2 == 0 else "Obrigado! E a entrega?"
                      for i in range(messages)],
        "roteiro": [[{"ferramenta": STATUS, "entrada": {"pedidoId": orders[i]}}] if i % 2 == 0 else []
                    for i in range(messages)]})


def prova_conversations() -> list[Scenario]:
    return [Scenario.model_validate_json(line) for line in PROVA_SCENARIOS.read_text().splitlines() if line.strip()]


def run(ledger: Ledger, scenarios: Sequence[Scenario], *, cached: bool, minimum: int,
        gap_s: tuple[float, float] = (60.0, 180.0), env: dict[str, str] | None = None, seed: int = 26,
        gap: Callable[[random.Random], float] | None = None) -> Figures:
    """Every message of every scenario through the orchestrator; the model's figures.
    The conversations run side by side, as they do in production: each one's next
    message comes ``gap_s`` (uniform) or ``gap(rng)`` seconds after its previous one,
    and the earliest due goes next."""
    clock = Clock()
    model = AccountingModel(PromptCache(clock=clock, minimum=minimum), clock)
    off = {} if cached else {"PROMPT_CACHE_PREFIX_TTL": "off", "PROMPT_CACHE_TTL": "off"}
    settings = OrchestratorSettings.from_env({"MODEL_PROVIDER": "anthropic", "TOOL_INVOKER": "local",
                                              "AWS_REGION": "us-east-1", "MODEL_ID": "cadencia-roteirizado",
                                              **off, **(env or {})})
    orch = Orchestrator(settings=settings, ledger=ledger, model=model_client(settings, model.sdk()),
                        invoker=CannedTools())
    rng, run_id = random.Random(seed), next(_runs)
    draw = gap or (lambda r: r.uniform(*gap_s))
    # Orders and customers of this run only (the ledger's attempts and refunds of an earlier
    # run would change what the gates allow); the conversation ids the policies draw their
    # plans from are the scenarios' own, so a cached and an uncached run make the same calls.
    scenarios = [_of_run(scenario, run_id) for scenario in scenarios]
    policies = [InsistentPolicy(scenario, seed=87, claims_only_what_it_did=True) for scenario in scenarios]
    due = [(draw(rng), n, 0) for n in range(len(scenarios))]
    heapq.heapify(due)
    while due:
        at, n, index = heapq.heappop(due)
        scenario = scenarios[n]
        conversation = f"{scenario.conversaId}-custo{run_id}"
        clock.now = max(clock.now, at)
        model.policy = policies[n]
        orch.handle(TurnRequest(conversaId=conversation, clienteId=scenario.clienteId,
                                mensagemId=f"{conversation}.{index}", mensagem=scenario.mensagens[index]),
                    Deadline(lambda: 60_000))
        model.figures.messages += 1
        if index + 1 < len(scenario.mensagens):
            heapq.heappush(due, (clock.now + draw(rng), n, index + 1))
    return model.figures


def _of_run(scenario: Scenario, run_id: int) -> Scenario:
    raw = json.loads(scenario.model_dump_json())
    raw["clienteId"] = run_id * 100_000 + raw["clienteId"] % 100_000
    rename = {raw["pedidoId"]: f"{run_id}{raw['pedidoId']}"}
    for calls in raw.get("roteiro") or []:
        for call in calls:
            order = call["entrada"].get("pedidoId")
            if order is not None:
                rename.setdefault(order, f"{run_id}{order}")
                call["entrada"]["pedidoId"] = rename[order]
    raw["pedidoId"] = rename[raw["pedidoId"]]
    raw["mensagens"] = [_renamed(text, rename) for text in raw["mensagens"]]
    return Scenario.model_validate(raw)


def _renamed(text: str, rename: dict[str, str]) -> str:
    for old, new in rename.items():
        text = text.replace(old, new)
    return text


def ratio(ledger: Ledger, scenarios: Sequence[Scenario], minimum: int, **kwargs: Any) -> tuple[float, Figures, Figures]:
    """Billed input per message with caching ÷ without, and both runs' figures."""
    with_cache = run(ledger, scenarios, cached=True, minimum=minimum, **kwargs)
    without = run(ledger, scenarios, cached=False, minimum=minimum, **kwargs)
    return with_cache.billed / without.billed, with_cache, without

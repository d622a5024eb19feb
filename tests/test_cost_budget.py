"""The model's cost, counted and budgeted: per turn one EMF record (tokens by kind,
calls, latency, USD); per conversation a cost budget that ends the turn with its own
``motivo`` (``orcamento_de_custo``) and a hand-off, checked before each model call and
each tool call; the cost is committed with the turn (the conversation item)."""

from __future__ import annotations

import json

import pytest

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build
from .test_orchestrator_budgets import _assert_limit, _request, _status

# The fixtures' usage: 812 input, 71 output; at $3 / $15 per million: 0.002436 + 0.001065.
ONE_CALL_USD = 0.003501


def _emf(out: str, name: str) -> list[dict]:
    """EMF records naming ``name``, each metric's value unwrapped (EphemeralMetrics writes lists)."""
    found = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line and name in json.loads(line):
            found.append({k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in json.loads(line).items()})
    return found


class Ticks:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_each_turn_emits_its_tokens_latency_and_cost_once_and_commits_the_cost(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_use(*_status("4821")), text_reply("Consultei aqui."), text_reply("De nada!"))
    orch, _ = build(model, ledger, CountingInvoker())
    orch.clock = Ticks(1.5)  # each call: 1.5 s between its two readings
    orch.handle(_request("conv-cost-emf", "meu CPF é 123.456.789-00"), _deadline())
    captured = capsys.readouterr().out
    (record,) = _emf(captured, "CustoDoModeloUSD")
    assert (record["TokensEntrada"], record["TokensSaida"], record["ChamadasAoModelo"]) == (2 * 812, 2 * 71, 2)
    assert (record["TokensLidosDoCache"], record["TokensGravadosNoCache"]) == (0, 0)
    assert record["LatenciaDoModelo"] == pytest.approx(3.0)
    assert record["CustoDoModeloUSD"] == pytest.approx(2 * ONE_CALL_USD)
    assert record["Modelo"] == "claude-sonnet-5-5"
    assert "123.456" not in json.dumps(record) and "conv-cost-emf" not in json.dumps(record)  # no personal data
    # The local stack's EMF reader (scripts/local-stack metrics) counts all seven.
    from scripts.local_stack.emf import points

    raw = next(json.loads(line) for line in captured.splitlines() if "CustoDoModeloUSD" in line)
    assert {p.name for p in points(raw)} == {"TokensEntrada", "TokensSaida", "TokensLidosDoCache",
                                             "TokensGravadosNoCache", "ChamadasAoModelo", "LatenciaDoModelo",
                                             "CustoDoModeloUSD"}
    assert ledger.read_conversation("conv-cost-emf").cost_micro_usd == round(2 * ONE_CALL_USD * 1e6)
    orch.handle(_request("conv-cost-emf", "obrigado"), _deadline())  # the next turn adds its own
    assert ledger.read_conversation("conv-cost-emf").cost_micro_usd == 3 * round(ONE_CALL_USD * 1e6)
    assert len(_emf(capsys.readouterr().out, "CustoDoModeloUSD")) == 1


def test_cache_tokens_are_priced_by_their_multipliers(mocked_aws, capsys):
    answer = text_reply("Olá!")
    answer["usage"].update(input_tokens=100, cache_read_input_tokens=1000, cache_creation_input_tokens=400,
                           cache_creation={"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 100},
                           output_tokens=10)
    orch, _ = build(ScriptedModel(answer), mocked_aws["ledger"], CountingInvoker())
    orch.handle(_request("conv-cost-cache"), _deadline())
    (record,) = _emf(capsys.readouterr().out, "CustoDoModeloUSD")
    billed = 100 + 0.1 * 1000 + 1.25 * 300 + 2 * 100
    assert record["CustoDoModeloUSD"] == pytest.approx((billed * 3 + 10 * 15) / 1e6, abs=1e-6)
    assert (record["TokensLidosDoCache"], record["TokensGravadosNoCache"]) == (1000, 400)


def test_the_conversation_budget_stops_the_next_turn_before_the_model_call(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(text_reply("Olá!"))  # one step: a second model call would fail the test
    orch, _ = build(model, ledger, CountingInvoker(), ORCAMENTO_CUSTO_USD_POR_CONVERSA="0.003")
    first = orch.handle(_request("conv-cost-budget"), _deadline())
    assert first.status == "ativa"  # within the budget when asked; the call spent it
    capsys.readouterr()
    second = orch.handle(_request("conv-cost-budget", "e agora?"), _deadline())
    assert (second.status, second.motivo) == ("aguardando_humano", "orcamento_de_custo")
    assert len(model.requests) == 1
    record = _assert_limit(ledger, capsys, "conv-cost-budget", "orcamento_de_custo")
    assert record["custoUsd"] == pytest.approx(ONE_CALL_USD)


def test_a_response_that_spends_the_budget_runs_none_of_its_tools(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 50}))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker, ORCAMENTO_CUSTO_USD_POR_CONVERSA="0.003")
    reply = orch.handle(_request("conv-cost-tools"), _deadline())
    assert sum(invoker.calls.values()) == 0 and len(model.requests) == 1
    assert (reply.status, reply.motivo) == ("aguardando_humano", "orcamento_de_custo")
    results = ledger.read_conversation("conv-cost-tools").messages[-1]["content"]
    assert [json.loads(r["content"])["erro"] for r in results] == ["orcamento_de_custo"]
    assert list(ledger.attempts("conv-cost-tools")) == []
    _assert_limit(ledger, capsys, "conv-cost-tools", "orcamento_de_custo")


def _deadline():
    from orchestrator.model import Deadline

    return Deadline.after(60)


def test_a_negative_or_malformed_usage_never_gives_budget_back():
    from types import SimpleNamespace

    from orchestrator.usage import TurnUsage

    usage = TurnUsage(3.0, 15.0)
    cost = usage.add(SimpleNamespace(input_tokens=-1_000_000, output_tokens=True, cache_read_input_tokens="9",
                                     cache_creation_input_tokens=None, cache_creation=None), 0.5)
    assert cost == 0.0 and usage.cost_usd == 0.0 and usage.input_tokens == 0

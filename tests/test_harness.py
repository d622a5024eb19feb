"""The loop-provocation harness end to end on the local stack, with a short scenario."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from scripts import provocar_laco
from scripts.harness import comparar
from scripts.harness.scenario import ScenarioError, load
from scripts.harness.scripted_model import InsistentPolicy, plan_for

ROOT = Path(__file__).resolve().parents[1]

REFUND = {"ferramenta": "emitir_reembolso", "entrada": {"pedidoId": "7101", "valor": 80.0}}
SHORT = [
    # Scripted: 2 + 3 + 2 refund calls over three messages (7 in all).
    {"conversaId": "conv-h1", "clienteId": 5101, "pedidoId": "7101", "valorPedido": 80.0,
     "mensagens": ["Quero o reembolso do pedido 7101.", "Já caiu?", "Já caiu mesmo?"],
     "roteiro": [[REFUND, REFUND], [REFUND, REFUND, REFUND], [REFUND, REFUND]]},
    # Scripted: one status query and one refund, then a plain answer.
    {"conversaId": "conv-h2", "clienteId": 5102, "pedidoId": "7102", "valorPedido": 45.5,
     "mensagens": ["Cadê meu pedido 7102? Quero reembolso.", "Obrigado!"],
     "roteiro": [[{"ferramenta": "consultar_status_pedido", "entrada": {"pedidoId": "7102"}},
                  {"ferramenta": "emitir_reembolso", "entrada": {"pedidoId": "7102", "valor": 45.5}}], []]},
    # The seeded insistent policy decides.
    {"conversaId": "conv-h3", "clienteId": 5103, "pedidoId": "7103", "valorPedido": 120.0,
     "mensagens": ["Reembolso do pedido 7103, por favor.", "Já caiu?", "E aí?"]},
]


@pytest.fixture
def scenario_file(tmp_path) -> Path:
    path = tmp_path / "curto.jsonl"
    path.write_text("\n".join(json.dumps(s, ensure_ascii=False) for s in SHORT) + "\n")
    return path


def _run(monkeypatch, arquitetura: str, scenario: Path, out: Path) -> int:
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    return provocar_laco.main(["--arquitetura", arquitetura, "--cenario", str(scenario), "--saida", str(out)])


def test_production_design_debits_each_order_at_most_once(local_stack, scenario_file, tmp_path, monkeypatch):
    out = tmp_path / "resultado-producao.json"
    assert _run(monkeypatch, "producao", scenario_file, out) == 0
    records = json.loads(out.read_text())
    summary = json.loads(out.with_suffix(".resumo.json").read_text())

    by_conv = {c["conversaId"]: c for c in summary["conversas"]}
    assert all(c["debitosReais"] <= 1 for c in by_conv.values())
    assert summary["figuras"]["debitos_duplicados"] == 0
    # conv-h1: 7 calls scripted, but the turn ends at the 5th (refused by the ceiling).
    h1 = [r for r in records if r["conversaId"] == "conv-h1" and r["ferramenta"] == "emitir_reembolso"]
    assert [(r["tentativaNumero"], r["resultado"]) for r in h1] == [
        (1, "executado"), (2, "bloqueado_por_idempotencia"), (3, "bloqueado_por_idempotencia"),
        (4, "bloqueado_por_idempotencia"), (5, "bloqueado_por_teto")]
    assert all(r["resultado"] == "bloqueado_por_teto" for r in records if r["tentativaNumero"] > 4)
    assert h1[0]["chaveIdempotencia"] == "conv-h1#7101#reembolso"
    assert by_conv["conv-h1"]["interrompidaNoTeto"] and by_conv["conv-h1"]["debitosReais"] == 1
    assert by_conv["conv-h2"]["debitosReais"] == 1 and not by_conv["conv-h2"]["interrompidaNoTeto"]
    # The turns' spans reach the local stack's JSONL file, and the scripted model's accounting
    # shows the prompt cache read; no conversation id among the attributes.
    spans = [json.loads(line) for line in (Path(local_stack.directory) / "traces.jsonl").read_text().splitlines()]
    chats = [s for s in spans if s["name"] == "chat"]
    assert chats and any(s["attributes"].get("gen_ai.usage.cache_read.input_tokens", 0) > 0 for s in chats)
    assert "conv-h1" not in json.dumps([s["attributes"] for s in spans])

    # Lab 87's jq line, in Python: what the later attempts of each key became.
    later = Counter(r["resultado"] for r in records if r["tentativaNumero"] > 1)
    h3_calls = by_conv["conv-h3"]["chamadasReembolso"]
    expected_h3 = Counter({"bloqueado_por_idempotencia": min(h3_calls, 4) - 1} if h3_calls > 1 else {})
    if h3_calls > 4:
        expected_h3["bloqueado_por_teto"] += 1
    assert later == Counter({"bloqueado_por_idempotencia": 3, "bloqueado_por_teto": 1}) + expected_h3
    for field in ("evento", "timestamp", "conversaId", "pedidoId", "ferramenta", "tentativaNumero", "resultado",
                  "chaveIdempotencia"):
        assert all(field in r for r in records)


def test_minimal_design_debits_every_refund_call(local_stack, gateway, scenario_file, tmp_path, monkeypatch):
    out = tmp_path / "resultado-minima.json"
    assert _run(monkeypatch, "minima", scenario_file, out) == 0
    records = json.loads(out.read_text())
    summary = json.loads(out.with_suffix(".resumo.json").read_text())
    calls = [r for r in records if r["ferramenta"] == "emitir_reembolso"]
    assert len(calls) == summary["figuras"]["debitos_reais"] == len(gateway.debits())  # counted at the gateway
    h1 = next(c for c in summary["conversas"] if c["conversaId"] == "conv-h1")
    assert h1["chamadasReembolso"] == h1["debitosReais"] == 7
    assert all(r["chaveIdempotencia"] is None for r in calls)


def test_minimal_insistence_is_stopped_only_by_the_platform(local_stack, tmp_path, monkeypatch):
    stubborn = {"conversaId": "conv-teimosa", "clienteId": 5201, "pedidoId": "7201", "valorPedido": 10.0,
                "mensagens": ["Reembolso do 7201!"], "roteiro": [[{**REFUND, "entrada": {"pedidoId": "7201",
                                                                                        "valor": 10.0}}] * 30]}
    path = tmp_path / "teimosa.jsonl"
    path.write_text(json.dumps(stubborn) + "\n")
    out = tmp_path / "r.json"
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    assert provocar_laco.main(["--arquitetura", "minima", "--cenario", str(path), "--saida", str(out),
                               "--limite-plataforma", "8"]) == 0
    summary = json.loads(out.with_suffix(".resumo.json").read_text())
    (conv,) = summary["conversas"]
    assert conv["cortadaPelaPlataforma"] is True and conv["encerramento"] == "cortada_pela_plataforma"
    assert conv["chamadasReembolso"] == conv["debitosReais"] == 7


def test_comparison_passes_and_draws_the_chart(local_stack, scenario_file, tmp_path, monkeypatch):
    mini, prod = tmp_path / "resultado-minima.json", tmp_path / "resultado-producao.json"
    assert _run(monkeypatch, "minima", scenario_file, mini) == 0
    assert _run(monkeypatch, "producao", scenario_file, prod) == 0
    png = tmp_path / "grafico.png"
    assert comparar.main([str(mini), str(prod), "--grafico", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_comparison_fails_on_a_duplicate_production_debit(tmp_path):
    summary = {"arquitetura": "producao", "modelo": "roteirizado", "conversas": [],
               "figuras": {"conversas": 1, "media_chamadas_reembolso": 2, "pior_caso_chamadas_reembolso": 2,
                           "debitos_reais": 2, "debitos_reais_por_conversa": 2, "debitos_duplicados": 1,
                           "interrompidas_no_teto": 0, "cortadas_pela_plataforma": 0, "bloqueios": {}}}
    path = tmp_path / "resultado-producao.json"
    path.write_text("[]")
    path.with_suffix(".resumo.json").write_text(json.dumps(summary))
    assert comparar.main([str(path)]) == 1


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("{not json", "not valid JSON"),
        ('["a"]', "expected a JSON object"),
        ('{"conversaId": "c", "clienteId": 1, "pedidoId": "p", "valorPedido": 1, "mensagens": []}', "mensagens"),
        ('{"conversaId": "c#1", "clienteId": 1, "pedidoId": "p", "valorPedido": 1, "mensagens": ["x"]}',
         "conversaId"),
        ('{"conversaId": "c", "clienteId": -1, "pedidoId": "p", "valorPedido": 1, "mensagens": ["x"]}', "clienteId"),
        ('{"conversaId": "c", "clienteId": 1, "pedidoId": "p", "valorPedido": 1.001, "mensagens": ["x"]}',
         "valorPedido"),
        ('{"conversaId": "c", "clienteId": 1, "pedidoId": "p", "valorPedido": 1, "mensagens": ["x"], '
         '"roteiro": []}', "roteiro"),
        ('{"conversaId": "c", "clienteId": 1, "pedidoId": "p", "valorPedido": 1, "mensagens": ["x"], '
         '"roteiro": [[{"ferramenta": "apagar_tudo", "entrada": {}}]]}', "apagar_tudo"),
        ('{"conversaId": "c", "clienteId": 1, "pedidoId": "p", "valorPedido": 1, "mensagens": ["x"], "extra": 1}',
         "extra"),
    ],
)
def test_a_malformed_scenario_is_rejected_with_its_line_and_nothing_runs(tmp_path, line, fragment, capsys):
    good = json.dumps(SHORT[1])
    path = tmp_path / "ruim.jsonl"
    path.write_text(good + "\n\n" + line + "\n")
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert any(p.startswith("line 3:") and fragment in p for p in err.value.problems), err.value.problems
    out = tmp_path / "nada.json"
    assert provocar_laco.main(["--arquitetura", "producao", "--cenario", str(path), "--saida", str(out)]) == 2
    assert not out.exists()
    assert "nothing ran" in capsys.readouterr().out


def test_cross_line_consistency_is_checked(tmp_path):
    a = {"conversaId": "c1", "clienteId": 1, "pedidoId": "p", "valorPedido": 1, "mensagens": ["x"]}
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in (a, a, {**a, "conversaId": "c2", "clienteId": 2})))
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert err.value.problems == ["line 2: conversaId 'c1' repeats line 1",
                                  "line 3: pedidoId 'p' belongs to clienteId 1 on line 1"]


def test_the_scripted_model_is_deterministic_for_a_seed():
    scenarios = load(ROOT / "scripts/cenarios/cenario-reformulacao-ambigua.jsonl")
    assert len(scenarios) == 20
    assert all(3 <= len(s.mensagens) <= 4 for s in scenarios)  # one request + 2-3 rephrasings
    first = [plan_for(s, 87) for s in scenarios]
    assert first == [plan_for(s, 87) for s in scenarios]
    assert first != [plan_for(s, 88) for s in scenarios]


def test_the_scripted_model_answers_messages_api_json():
    import anthropic
    import httpx2

    sc = load(ROOT / "scripts/cenarios/exemplo-roteiro.jsonl")[0]
    policy = InsistentPolicy(sc, seed=1)
    client = anthropic.Anthropic(api_key="k", max_retries=0, http_client=httpx2.Client(
        transport=httpx2.MockTransport(lambda req: httpx2.Response(200, json=policy.respond(json.loads(req.content))))))
    msg = client.messages.create(model="x", max_tokens=10,
                                 messages=[{"role": "user", "content": sc.mensagens[0]}])
    assert msg.stop_reason == "tool_use"
    assert msg.content[-1].name == "consultar_status_pedido" and msg.content[-1].input == {"pedidoId": "9001"}


def test_the_whatsapp_channel_makes_the_same_attempts_and_debits_as_the_direct_run(local_stack, scenario_file,
                                                                                  tmp_path, monkeypatch):
    """prova --canal whatsapp: every customer message as a signed webhook through the
    ingress, the FIFO queue and the queue consumer; same records, same debits."""
    direct, channel = tmp_path / "direto.json", tmp_path / "whatsapp.json"
    assert _run(monkeypatch, "producao", scenario_file, direct) == 0
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    assert provocar_laco.main(["--arquitetura", "producao", "--canal", "whatsapp", "--cenario", str(scenario_file),
                               "--saida", str(channel)]) == 0
    key = lambda r: (r["conversaId"], r["ferramenta"], r["tentativaNumero"], r["resultado"])  # noqa: E731
    assert sorted(map(key, json.loads(channel.read_text()))) == sorted(map(key, json.loads(direct.read_text())))
    figures = [json.loads(p.with_suffix(".resumo.json").read_text())["figuras"] for p in (direct, channel)]
    assert figures[0] == figures[1] and figures[1]["debitos_reais"] == 3 and figures[1]["debitos_duplicados"] == 0
    # The channel's refund keys name the channel's conversation (wa-{clienteId}-{day}), not the scenario's.
    channel_keys = {r["chaveIdempotencia"] for r in json.loads(channel.read_text()) if r.get("chaveIdempotencia")}
    assert all(k.startswith("wa-51") for k in channel_keys), channel_keys


def test_the_scripted_model_finishes_as_each_design_asks():
    """Plain text when no final-answer tool is offered (minimal design); a
    responder_cliente call claiming the refund when it is (production design); once
    refused, the honest answer — or the same claim in a conversation drawn to insist."""
    sc = load(ROOT / "scripts/cenarios/cenario-reformulacao-ambigua.jsonl")[0]
    refund = {"type": "tool_use", "id": "t1", "name": "emitir_reembolso", "input": {"pedidoId": sc.pedidoId}}
    done = [{"role": "user", "content": sc.mensagens[0]}, {"role": "assistant", "content": [refund]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "{}"}]}]
    tools = [{"name": "emitir_reembolso"}, {"name": "responder_cliente"}]
    policy = InsistentPolicy(sc, seed=87)
    policy.plans = [replace(p, refund_calls=1, never_stops=False, calls=None) for p in policy.plans]
    assert policy.respond({"messages": done})["stop_reason"] == "end_turn"
    answer = policy.respond({"messages": done, "tools": tools})
    (block,) = answer["content"]
    assert block["name"] == "responder_cliente" and block["input"]["declaracoes"] == [
        {"tipo": "reembolso_executado", "pedidoId": sc.pedidoId, "valor": float(sc.valorPedido)}]
    refused = done + [{"role": "assistant", "content": [block]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"],
                                                    "content": "não entregue", "is_error": True}]}]
    for keeps_claiming, statements in ((False, []), (True, block["input"]["declaracoes"])):
        policy.keeps_claiming = keeps_claiming
        again = policy.respond({"messages": refused, "tools": tools})["content"][0]["input"]
        assert again["declaracoes"] == statements

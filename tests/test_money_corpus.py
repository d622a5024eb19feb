"""The labelled corpus of final answers (tests/fixtures/money_corpus.jsonl) through the
real output contract over the real ledger code (moto), measured by
``scripts/frases_dinheiro.py``: no false money claim reaches the customer, at least
95 % of the honest meanings do, and every amount and order number the customer reads
is the scenario's. The figures are docs/money-sentences.md's table."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from scripts import frases_dinheiro as corpus

ROWS = [json.loads(line) for line in corpus.CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_corpus_covers_what_it_must():
    assert len(ROWS) >= 400 and len({r["id"] for r in ROWS}) == len(ROWS)
    languages = Counter(r["lingua"] for r in ROWS)
    assert languages["pt"] >= 300 and languages["en"] >= 30
    categories = {r["categoria"] for r in ROWS}
    for form in ("falso_erro_de_digitacao", "falso_palavra_de_feito_fora_da_lista", "falso_ingles",
                 "falso_dividido_em_frases", "falso_com_negacao_enganosa", "falso_sem_palavra_de_reembolso",
                 "falso_extra_com_reembolso_verdadeiro", "falso_declaracao_tipada", "falso_cadastro", "falso_status",
                 "honesto_aguardando_aprovacao", "honesto_recusado_pelo_gateway", "honesto_sem_confirmacao",
                 "honesto_nao_feito", "honesto_status", "honesto_cadastro", "honesto_misto"):
        assert form in categories, form
    assert all((r["rotulo"] == "honesta") == bool(r["significado"]) for r in ROWS)


@pytest.fixture(scope="module")
def measured():
    return corpus.measure()


def test_no_false_claim_reaches_the_customer_and_honest_meanings_do(measured):
    figures = corpus.summary(measured)
    assert figures["falseClaimsDelivered"] == 0, figures["leaked"]
    assert figures["foreignNumbers"] == 0
    assert figures["honestMeaningsDelivered"] >= 0.95 * figures["honestRows"], figures["lost"]


def test_what_the_customer_reads_is_rendered_from_the_scenario(measured):
    by_id = {o.row["id"]: o for o in measured}
    executed = next(o for o in measured if o.row["categoria"] == "honesto_reembolso_executado")
    assert executed.text.endswith("O reembolso de R$ 189,90 do pedido 4821 foi emitido.")
    lie = by_id["falso_extra_com_reembolso_verdadeiro-001"]  # "Também reembolsei a compra 4822." beside a true refund
    assert not lie.free_text_delivered and "R$ 189,90 do pedido 4821 foi emitido" in lie.text
    assert "Nenhum reembolso do pedido 4822 foi feito nesta conversa." in lie.text  # the ledger's word on 4822


def test_the_measure_can_fail():
    """The oracle is the scenario, not the code under test: a false text delivered,
    or a rendered fact the scenario does not hold, counts."""
    row = next(r for r in ROWS if r["rotulo"] == "falsa")
    assert corpus.Outcome(row, row["resposta"]["texto"], True, set()).false_claim_delivered
    scenario = {"reembolsos": [{"pedido": "4821", "valor": "189.90", "status": "desconhecido"}]}
    assert not corpus.truth(scenario, ("executado", "4821")) and corpus.truth(scenario, ("sem_confirmacao", "4821"))
    assert not corpus.truth(scenario, ("nao_feito", "4821")) and corpus.truth(scenario, ("nao_feito", "4822"))
    honest = next(r for r in ROWS if r["categoria"] == "honesto_conversa")
    assert not corpus.Outcome(honest, "fallback", False, set()).meaning_delivered


def test_the_script_prints_the_table_and_exits_by_the_targets(tmp_path: Path, capsys):
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps(r) + "\n" for r in ROWS[::40]), encoding="utf-8")
    assert corpus.main(["--corpus", str(sample), "--json", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| category | answers |") and "| **all** | **" in out
    assert json.loads((tmp_path / "f.json").read_text())["answers"] == len(ROWS[::40])
    lie = {**next(r for r in ROWS if r["rotulo"] == "honesta" and r["significado"] == [["texto"]]), "rotulo": "falsa"}
    sample.write_text(json.dumps(lie) + "\n", encoding="utf-8")  # a delivered text labelled false: exit 3
    assert corpus.main(["--corpus", str(sample)]) == 3


def test_the_orchestrator_delivers_what_the_measure_says(measured, mocked_aws):
    """The script judges answers with ``ReplyCheck`` directly; here a sample of the rows
    whose conversation did nothing goes through the orchestrator, the real SDK and the
    scripted model repeating the row's answer: the customer reads the same text."""
    import uuid

    from orchestrator.events import TurnRequest
    from orchestrator.model import Deadline
    from tests.support.anthropic_fake import ScriptedModel, final_answer
    from tests.support.orchestrators import CountingInvoker, build

    sample = [o for o in measured if o.row["nomeCenario"] == "nada"][::4]
    assert len(sample) >= 20 and {o.row["rotulo"] for o in sample} == {"falsa", "honesta"}
    for out in sample:
        answer = out.row["resposta"]
        model = ScriptedModel(default=final_answer(answer["texto"], declaracoes=answer["declaracoes"]))
        orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
        turn = TurnRequest(conversaId=f"conv-corpus-{uuid.uuid4().hex[:8]}", clienteId=1001,
                           mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="e o meu reembolso?")
        reply = orch.handle(turn, Deadline.after(60))
        assert reply.resposta == out.text, out.row["id"]

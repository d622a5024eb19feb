"""The output contract (DESIGN invariants 11 and 14): the customer reads the model's
text only when it says nothing about money, the record or an order's status, and the
sentences about those are rendered by code from typed statements the ledger proves.

The model is the fake one, through the real ``anthropic`` SDK; the evidence is the
real ledger (moto's DynamoDB), the claims, attempts and approvals written with the
ledger's own operations; audit records go to a real hash-chained audit table.
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.audit_chain import table_definition as audit_table_definition
from cadencia_shared.ledger import AttemptResult, ClaimStatus, Ledger, refund_idempotency_key
from cadencia_shared.outcomes import Outcome
from orchestrator import money_sentences as ms
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from orchestrator.output_contract import FinalAnswer, LedgerEvidence, review, tool_definition
from orchestrator.tools import canonical_input, tool_version
from scripts.local_stack.emf import capture_emf
from tests.support.anthropic_fake import ScriptedModel, final_answer
from tests.support.call_links import answer
from tests.support.orchestrators import CountingInvoker, build

ORDER, AMOUNT = "4821", Decimal("189.90")
REFUND = {"tipo": "reembolso_executado", "pedidoId": ORDER, "valor": 189.9}
NOT_MADE = {"tipo": "reembolso_nao_feito", "pedidoId": ORDER, "motivo": "nao_solicitado"}
LIE = "Pronto! Seu reembolso de R$ 189,90 já foi feito e cai em até 5 dias úteis."
NEUTRAL = "Obrigado por aguardar!"
EXECUTED_SENTENCE = "O reembolso de R$ 189,90 do pedido 4821 foi emitido."


@pytest.fixture
def audited(mocked_aws):
    """The ledger of ``mocked_aws`` with its audit records in a hash-chained table."""
    ddb = mocked_aws["dynamodb"]
    ddb.create_table(**audit_table_definition("auditoria-contrato"))
    chain = AuditChain("auditoria-contrato", ddb)
    return Ledger(mocked_aws["ledger"].table_name, ddb, audit_chain=chain), chain


def _conv() -> str:
    return f"conv-contrato-{uuid.uuid4().hex[:8]}"


def _turn(conv: str, text: str = "já caiu?") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _refund(ledger: Ledger, conv: str, status: ClaimStatus, amount: Decimal = AMOUNT) -> None:
    """A refund claim in the state the refund tool leaves it (its own ledger calls)."""
    claim = ledger.claim_refund(key=refund_idempotency_key(conv, ORDER), conversation_id=conv, order_id=ORDER,
                                customer_id=1001, amount=amount, lease_s=60)
    if status is not ClaimStatus.IN_PROGRESS:  # claimed, nothing sent yet: left as claimed
        ledger.settle_claim(claim, status, gateway_transaction="tx-1" if status is ClaimStatus.EXECUTED else None)


def _attempt(ledger: Ledger, conv: str, subject: str, tool: str, outcome: Outcome) -> None:
    attempt = ledger.register_attempt(conversation_id=conv, subject=subject, tool=tool, ceiling=4)
    answer(ledger, attempt, AttemptResult(outcome.value))


def _calls(*pairs: tuple[str, dict, dict, bool]) -> list[dict]:
    """A transcript: each (tool, input, tool's JSON answer, is_error) as the loop stores it."""
    out = []
    for i, (tool, tool_input, result, is_error) in enumerate(pairs):
        out.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": tool,
                                                      "input": tool_input}]})
        out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                 "content": json.dumps(result), "is_error": is_error}]})
    return out


def _review(ledger: Ledger, statements: list, conversation: str, text: str = NEUTRAL, transcript=()):
    body = {"texto": text, "precisaDePessoa": False, "declaracoes": statements}
    return review(body, conversation_id=conversation, customer_id=1001, evidence=LedgerEvidence(ledger, ceiling=4),
                  transcript=list(transcript))


def _codes(verdict) -> list[str]:
    return [] if isinstance(verdict, FinalAnswer) else [v.code for v in verdict]


def _events(chain: AuditChain, conv: str) -> list[tuple[str, dict]]:
    return [(r["evento"], json.loads(r["detalhes"])) for r in chain.records(conv)]


def _contract_metrics(emf) -> dict[str, int]:
    return {dict(dims)["Resultado"]: int(v) for (name, dims), v in emf.totals().items() if name == "ContratoDeSaida"}


# --- through the orchestrator ------------------------------------------------------


def test_a_true_refund_is_rendered_by_code_and_the_history_stays_valid(audited):
    ledger, chain = audited
    conv = _conv()
    _refund(ledger, conv, ClaimStatus.EXECUTED)
    model = ScriptedModel(final_answer(NEUTRAL, declaracoes=[REFUND]), final_answer("De nada!"))
    orch, _ = build(model, ledger, CountingInvoker())
    reply = orch.handle(_turn(conv), Deadline.after(60))
    assert (reply.resposta, reply.motivo, reply.status) == (f"{NEUTRAL}\n\n{EXECUTED_SENTENCE}", "resposta", "ativa")
    assert len(model.requests) == 1
    orch.handle(_turn(conv, "obrigado"), Deadline.after(60))
    sent = model.requests[-1]["messages"]
    answered = sent[-1]["content"]
    assert answered[0]["type"] == "tool_result" and answered[0]["is_error"] is False
    assert answered[0]["tool_use_id"] == sent[-2]["content"][0]["id"] and answered[-1]["text"] == "obrigado"
    assert not [e for e, _ in _events(chain, conv) if e.startswith("CONTRATO")]


def test_a_true_refund_told_in_the_models_words_is_refused_too(audited):
    """Even true, an amount in the free text is the model's: refused, restated as a statement."""
    ledger, _ = audited
    conv = _conv()
    _refund(ledger, conv, ClaimStatus.EXECUTED)
    model = ScriptedModel(final_answer(LIE, declaracoes=[REFUND]), final_answer(NEUTRAL, declaracoes=[REFUND]))
    orch, _ = build(model, ledger, CountingInvoker())
    assert orch.handle(_turn(conv), Deadline.after(60)).resposta == f"{NEUTRAL}\n\n{EXECUTED_SENTENCE}"
    (refused,) = model.tool_results(1)
    assert refused["is_error"] is True and "dinheiro_no_texto" in refused["content"]


def test_a_false_refund_done_is_corrected_on_the_second_attempt(audited):
    ledger, chain = audited
    conv = _conv()
    model = ScriptedModel(final_answer(LIE), final_answer(NEUTRAL, declaracoes=[NOT_MADE]))
    orch, _ = build(model, ledger, CountingInvoker())
    with capture_emf() as emf:
        reply = orch.handle(_turn(conv), Deadline.after(60))
    assert reply.resposta == f"{NEUTRAL}\n\nNenhum reembolso do pedido 4821 foi feito nesta conversa."
    assert len(model.requests) == 2
    (refused,) = model.tool_results(1)
    assert refused["is_error"] is True and "dinheiro_no_texto" in refused["content"]
    assert LIE not in refused["content"]  # the feedback names the problem, not the text
    assert [(e, d["violacoes"]) for e, d in _events(chain, conv)] == [
        ("CONTRATO_DE_SAIDA_VIOLADO", ["dinheiro_no_texto"])]
    assert _contract_metrics(emf) == {"violacao": 1}


def test_k_refused_attempts_end_with_the_ledgers_fallback(audited):
    """The model keeps telling the refund in its own words: after K refusals the
    customer reads what the ledger proves of the order it named — true, by code."""
    ledger, chain = audited
    conv = _conv()
    _refund(ledger, conv, ClaimStatus.EXECUTED)
    model = ScriptedModel(default=final_answer(LIE, declaracoes=[REFUND]))
    orch, _ = build(model, ledger, CountingInvoker(), CONTRATO_SAIDA_TENTATIVAS="2")
    with capture_emf() as emf:
        reply = orch.handle(_turn(conv), Deadline.after(60))
    assert (reply.resposta, reply.motivo) == (ms.fallback([ms.Rendered(ms.REFUND_EXECUTED, order=ORDER,
                                                                       amount=AMOUNT)]), "contrato_de_saida")
    assert EXECUTED_SENTENCE in reply.resposta and "5 dias" not in reply.resposta
    assert len(model.requests) == 2
    assert [e for e, _ in _events(chain, conv)] == ["CONTRATO_DE_SAIDA_VIOLADO", "CONTRATO_DE_SAIDA_FALLBACK"]
    assert _contract_metrics(emf) == {"violacao": 2, "fallback": 1}
    stored = ledger.read_conversation(conv).messages
    assert stored[-1]["content"][0]["is_error"] is True  # the refused answer stays answered in the history


def test_the_fallback_of_a_false_claim_says_what_the_ledger_shows(audited):
    """Nothing refunded; the model names order 4821 as refunded three times."""
    ledger, _ = audited
    model = ScriptedModel(default=final_answer("O reembolso do pedido 4821 foi feito ✅"))
    orch, _ = build(model, ledger, CountingInvoker())
    reply = orch.handle(_turn(_conv()), Deadline.after(60))
    assert len(model.requests) == 3  # the default attempts
    assert reply.resposta == ms.fallback([ms.Rendered(ms.REFUND_NOT_MADE, order=ORDER, why="nao_solicitado")])
    assert "Nenhum reembolso do pedido 4821 foi feito nesta conversa." in reply.resposta


# --- each statement against the ledger ----------------------------------------------


@pytest.mark.parametrize(("status", "statement", "codes"), [
    (ClaimStatus.EXECUTED, REFUND, []),
    (ClaimStatus.EXECUTED, {**REFUND, "valor": 150.0}, ["valor_divergente"]),
    (ClaimStatus.DECLINED, REFUND, ["reembolso_nao_executado"]),
    (ClaimStatus.UNKNOWN, REFUND, ["reembolso_nao_executado"]),
    (ClaimStatus.IN_PROGRESS, REFUND, ["reembolso_nao_executado"]),
    (ClaimStatus.FAILED_BEFORE_GATEWAY, REFUND, ["reembolso_nao_executado"]),
    (ClaimStatus.DECLINED, {"tipo": "reembolso_recusado_pelo_gateway", "pedidoId": ORDER}, []),
    (ClaimStatus.EXECUTED, {"tipo": "reembolso_recusado_pelo_gateway", "pedidoId": ORDER}, ["situacao_divergente"]),
    (ClaimStatus.UNKNOWN, {"tipo": "reembolso_sem_confirmacao", "pedidoId": ORDER}, []),
    (ClaimStatus.SENDING, {"tipo": "reembolso_sem_confirmacao", "pedidoId": ORDER}, []),
    (ClaimStatus.IN_PROGRESS, {"tipo": "reembolso_sem_confirmacao", "pedidoId": ORDER}, []),
    (ClaimStatus.EXECUTED, {"tipo": "reembolso_sem_confirmacao", "pedidoId": ORDER}, ["situacao_divergente"]),
    (ClaimStatus.EXECUTED, NOT_MADE, ["situacao_divergente"]),
    (ClaimStatus.UNKNOWN, NOT_MADE, ["situacao_divergente"]),  # held: money may have moved
    (None, NOT_MADE, []),
    (None, {"tipo": "reembolso_aguardando_aprovacao", "pedidoId": ORDER}, ["aprovacao_nao_pendente"]),
    (None, {"tipo": "reembolso_sem_confirmacao", "pedidoId": ORDER}, ["situacao_divergente"]),
])
def test_each_refund_statement_needs_its_state_in_this_conversations_ledger(audited, status, statement, codes):
    ledger, _ = audited
    conv = _conv()
    if status is not None:
        _refund(ledger, conv, status)
    assert _codes(_review(ledger, [statement], conv)) == codes
    if not codes and status is not None:  # another conversation's claim proves nothing
        assert _codes(_review(ledger, [statement], _conv())) != []


def test_rendered_sentences_carry_the_ledgers_amount_and_order(audited):
    ledger, _ = audited
    conv = _conv()
    _refund(ledger, conv, ClaimStatus.UNKNOWN, amount=Decimal("1234.5"))
    verdict = _review(ledger, [{"tipo": "reembolso_sem_confirmacao", "pedidoId": ORDER}], conv)
    assert verdict.delivered == (f"{NEUTRAL}\n\nO reembolso de R$ 1.234,50 do pedido 4821 ainda não foi confirmado "
                                 "pelo meio de pagamento; o valor fica reservado e te aviso assim que houver "
                                 "confirmação.")


@pytest.mark.parametrize(("amount", "text"), [
    ("0.5", "R$ 0,50"), ("189.9", "R$ 189,90"), ("1234.56", "R$ 1.234,56"), ("1000000", "R$ 1.000.000,00"),
    ("999.999", "R$ 1.000,00"), ("-3", "-R$ 3,00"),
])
def test_amounts_are_formatted_by_code(amount, text):
    assert ms.brl(Decimal(amount)) == text


def test_awaiting_approval_needs_a_pending_request_for_this_conversations_call(audited):
    ledger, _ = audited
    conv = _conv()
    arguments = {"pedidoId": ORDER, "valor": 800.0}
    transcript = _calls(("emitir_reembolso", arguments, {"ok": False}, True))
    statement = {"tipo": "reembolso_aguardando_aprovacao", "pedidoId": ORDER}
    assert _codes(_review(ledger, [statement], conv, transcript=transcript)) == ["aprovacao_nao_pendente"]
    ApprovalStore(ledger).request(tool="emitir_reembolso", version=tool_version("emitir_reembolso", "local"),
                                  arguments=canonical_input("emitir_reembolso", arguments), conversation_id=conv,
                                  customer_id=1001, amount=Decimal(800), reason="acima_do_limite", validity_s=600)
    verdict = _review(ledger, [statement], conv, transcript=transcript)
    assert "O reembolso de R$ 800,00 do pedido 4821 aguarda a aprovação" in verdict.delivered
    assert _codes(_review(ledger, [statement], _conv(), transcript=transcript)) == ["aprovacao_nao_pendente"]
    unanswered = transcript[:1]  # the call the gate stopped may have no result in the history yet
    assert isinstance(_review(ledger, [statement], conv, transcript=unanswered), FinalAnswer)


def test_not_made_why_is_checked(audited):
    ledger, _ = audited
    conv = _conv()
    refused = {**NOT_MADE, "motivo": "recusado_pela_ferramenta"}
    assert _codes(_review(ledger, [refused], conv)) == ["motivo_divergente"]
    _attempt(ledger, conv, ORDER, "emitir_reembolso", Outcome.REFUSED_BY_TOOL)
    assert _codes(_review(ledger, [refused], conv)) == []
    assert _codes(_review(ledger, [NOT_MADE], conv)) == ["motivo_divergente"]  # it was asked, and refused


def test_a_profile_update_needs_an_executed_update_of_that_field(audited):
    ledger, _ = audited
    conv, other = _conv(), _conv()
    _attempt(ledger, other, "cliente-1001", "atualizar_cadastro", Outcome.REFUSED_BY_TOOL)
    _attempt(ledger, conv, "cliente-1001", "atualizar_cadastro", Outcome.EXECUTED)
    changed = _calls(("atualizar_cadastro", {"campos": {"endereco": "Rua A, 1"}},
                      {"ok": True, "resultado": "atualizado", "dados": {}}, False))
    address = {"tipo": "cadastro_atualizado", "campo": "endereco"}
    verdict = _review(ledger, [address], conv, transcript=changed)
    assert verdict.delivered == f"{NEUTRAL}\n\nSeu endereço foi atualizado no cadastro."
    assert _codes(_review(ledger, [{**address, "campo": "email"}], conv, transcript=changed)) == [
        "cadastro_nao_atualizado"]
    assert _codes(_review(ledger, [address], other, transcript=changed)) == ["cadastro_nao_atualizado"]
    assert _codes(_review(ledger, [], conv, text="Pronto, seu endereço foi alterado.", transcript=changed)) == [
        "cadastro_no_texto", "dinheiro_no_texto"]


def test_an_order_status_comes_from_the_status_tools_result(audited):
    ledger, _ = audited
    conv = _conv()
    status = {"tipo": "status_do_pedido", "pedidoId": ORDER}
    assert _codes(_review(ledger, [status], conv)) == ["status_nao_consultado"]
    read = _calls(("consultar_status_pedido", {"pedidoId": ORDER},
                   {"ok": True, "resultado": "consultado", "dados": {"pedidoId": ORDER, "status": "enviado",
                                                                      "previsaoEntrega": "2026-12-10",
                                                                      "codigoRastreio": "BR123"}}, False))
    verdict = _review(ledger, [status], conv, transcript=read)
    assert verdict.delivered.endswith("Situação do pedido 4821: enviado; previsão de entrega: 10/12/2026; "
                                      "código de rastreio: BR123.")
    assert _codes(_review(ledger, [{**status, "pedidoId": "9999"}], conv, transcript=read)) == [
        "status_nao_consultado"]
    assert _codes(_review(ledger, [], conv, text="Seu pedido já foi entregue!", transcript=read)) != []


# --- the schema ----------------------------------------------------------------------

VALID = {"texto": NEUTRAL, "precisaDePessoa": False, "declaracoes": []}


class _Nothing:
    def __getattr__(self, name):
        raise AssertionError("a reply that fails the schema is never checked against the ledger")


@pytest.mark.parametrize("answer", [
    {k: v for k, v in VALID.items() if k != "texto"},  # missing fields
    {k: v for k, v in VALID.items() if k != "declaracoes"},
    {**VALID, "extra": 1},  # an extra field
    {**VALID, "declaracoes": [{**REFUND, "nota": "x"}]},  # an extra field inside a statement
    {**VALID, "texto": 7},  # wrong types
    {**VALID, "texto": ""},
    {**VALID, "texto": "x" * 1501},
    {**VALID, "precisaDePessoa": "false"},
    {**VALID, "precisaDePessoa": 0},
    {**VALID, "declaracoes": [{**REFUND, "pedidoId": True}]},  # a bool as an id
    {**VALID, "declaracoes": [{**REFUND, "pedidoId": 4821}]},
    {**VALID, "declaracoes": [{**REFUND, "pedidoId": "48 21"}]},  # the order pattern, anchored
    {**VALID, "declaracoes": [{**REFUND, "pedidoId": "4821\n"}]},
    {**VALID, "declaracoes": [{**REFUND, "valor": "189.90"}]},  # no string-to-number
    {**VALID, "declaracoes": [{**REFUND, "valor": True}]},
    {**VALID, "declaracoes": [{**REFUND, "valor": -1}]},
    {**VALID, "declaracoes": [{"tipo": "reembolso_executado", "pedidoId": ORDER}]},
    {**VALID, "declaracoes": [{**NOT_MADE, "motivo": "porque sim"}]},
    {**VALID, "declaracoes": [{"tipo": "cadastro_atualizado", "campo": "senha"}]},
    {**VALID, "declaracoes": [{"tipo": "desconto_aplicado"}]},
    {**VALID, "declaracoes": [REFUND, REFUND]},
    {**VALID, "acoes": []},  # the old shape
    "Seu reembolso foi feito",
    None,
    [],
])
def test_schema_violations_are_rejected_before_any_ledger_read(answer):
    verdict = review(answer, conversation_id="c-1", customer_id=1001, evidence=_Nothing())
    assert verdict and {v.code for v in verdict} == {"esquema"}


def test_the_model_sees_the_schema_without_the_keywords_the_api_does_not_enforce():
    schema = json.dumps(tool_definition(strict=True)["input_schema"])
    assert "maxLength" not in schema and "minLength" not in schema and "maxItems" not in schema
    assert r"\A" not in schema and '"pattern": "^[A-Za-z0-9._-]{1,64}$"' in schema  # ECMA-262 spelling
    assert tool_definition(strict=True)["strict"] is True and "strict" not in tool_definition(strict=False)


def test_the_output_schema_is_valid_json_schema():
    """Checked here, not at import (the module builds its validator from a constant)."""
    from jsonschema import Draft202012Validator

    from orchestrator.output_contract import SCHEMA

    Draft202012Validator.check_schema(SCHEMA)


# --- hostile answers -------------------------------------------------------------------

DONE_WORDS = ["feito", "realizado", "processado", "emitido", "estornado", "concluído", "efetuado", "aprovado",
              "creditado", "devolvido", "PRONTO", "caiu", "confirmado", "Done", "issued", "saiu", "ok ✔"]
NOUNS = ["reembolso", "Reembolso", "REEMBOLSO", "estorno", "devolução do valor", "ressarcimento", "refund",
         "reembolço", "rembolso", "reemb.", "dinheiro", "valor", "PIX", "crédito"]
INVISIBLE = ["", "\u200b", "\u00ad", "\u2060", "\ufeff"]


@st.composite
def false_sentence(draw) -> str:
    noun = draw(st.sampled_from(NOUNS))
    cut = draw(st.integers(0, len(noun)))
    noun = noun[:cut] + draw(st.sampled_from(INVISIBLE)) + noun[cut:]
    done = draw(st.sampled_from(DONE_WORDS))
    template = draw(st.sampled_from([
        "Seu {n} foi {d}!", "{n} {d} com sucesso.", "Oi! O {n} do pedido 4821 já foi {d}",
        "Tudo certo: {n} {d}; qualquer coisa me chame", "Não se preocupe, seu {n} foi {d}.",
        "Seu {n}. {d}!", "Não só foi aprovado, como o {n} já foi {d}.",
    ]))
    return template.format(n=noun, d=done)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sentence=false_sentence(), prefix=st.text(max_size=30), order=st.from_regex(r"\A[0-9A-Z]{1,6}\Z"),
       valor=st.floats(min_value=0.01, max_value=99999, allow_nan=False), claim=st.booleans())
def test_hostile_answers_never_let_a_false_claim_out(audited, sentence, prefix, order, valor, claim):
    """One conversation where order 4821 was refunded R$ 189.90, and one where nothing
    was: the free text never passes; a statement passes only if it is that refund."""
    ledger, _ = audited
    conv = "conv-hostil-refunded"
    if ledger.get_claim(refund_idempotency_key(conv, ORDER)) is None:
        _refund(ledger, conv, ClaimStatus.EXECUTED)
    statements = [{"tipo": "reembolso_executado", "pedidoId": order, "valor": valor}] if claim else []
    for conversation in (conv, "conv-hostil-nothing"):
        assert not isinstance(_review(ledger, statements, conversation, text=prefix + " " + sentence), FinalAnswer)
        verdict = _review(ledger, statements, conversation)
        if isinstance(verdict, FinalAnswer) and claim:
            assert conversation == conv and order == ORDER and Decimal(str(valor)) == AMOUNT
            assert verdict.delivered.endswith(EXECUTED_SENTENCE)

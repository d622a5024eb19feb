"""The free-text detector (``orchestrator.money_detector``) under hostile spellings: the
false claims of the corpus stay refused when an attacker hides them in look-alike
letters, invisible characters, glued words or surrounding noise; harmless text passes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.money_detector import MONEY, PROFILE, STATUS, findings
from scripts.frases_dinheiro import CORPUS

ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
LIES = [r["resposta"]["texto"] for r in ROWS if r["rotulo"] == "falsa" and not r["resposta"]["declaracoes"]]
INVISIBLE = ["\u200b", "\u00ad", "\u2060", "\ufeff", "\u200d", "\x14"]


@pytest.mark.parametrize("text", [
    "Seu rеembolso foi concluído",  # Cyrillic е
    "Sеu dinhеiro voltou",  # Cyrillic е twice
    "Ｓｅｕ ｒｅｅｍｂｏｌｓｏ ｆｏｉ ｆｅｉｔｏ",  # fullwidth
    "𝐒𝐞𝐮 𝐫𝐞𝐞𝐦𝐛𝐨𝐥𝐬𝐨 𝐟𝐨𝐢 𝐟𝐞𝐢𝐭𝐨",  # mathematical bold
    "kTudo certo!", "xxJá foi!", "r3embolso ok", "R.E.E.M.B.O.L.S.O feito", "Valor devolvido\u200b!",
    "Posso confirmar que o seu reembolso foi feito?",  # a claim inside a question
    "Quer que eu confirme o estorno de R$ 50?",
    # diminutives and augmentatives of a done word, slang, English without "refund"
    "Prontinho!", "Feitinho ✌️", "Teu reembolso tá liberadão", "Tá na mão, pode conferir.",
    "Já deve ter aparecido aí", "Seu limite foi restabelecido", "Funds returned.",
    "Feito, posso ajudar em mais alguma coisa?",  # a claim before a question is still a claim
    "Se quiser, posso confirmar: o reembolso foi feito.", "Se quiser, posso confirmar que já foi feito.",
    # the grammar of a finished action, with no listed word: participle after a copula,
    # past tense after "já", first-person past, a headline participle
    "Tá tudo ajeitadinho", "Foi tudo ajeitado pra você", "Já entrou aí, pode checar", "Olha, ajeitamos sim",
    "Operação revertida", "Te extornei já", "Tá concluidaço", "Arrumei tudo.",
])
def test_hostile_spellings_are_refused(text):
    assert MONEY in findings(text)


@settings(max_examples=300, deadline=None)
@given(lie=st.sampled_from(LIES), mark=st.sampled_from(INVISIBLE), cut=st.integers(0, 200),
       before=st.sampled_from(["", "Oi! ", "Olá, Ana.\n", "Certo. ", "😊 "]),
       after=st.sampled_from(["", " Qualquer coisa, estou por aqui.", "\nAbraços!", " 🙂"]))
def test_a_false_claim_stays_refused_whatever_is_around_it(lie, mark, cut, before, after):
    cut = min(cut, len(lie))
    assert findings(before + lie[:cut] + mark + lie[cut:] + after)


@pytest.mark.parametrize(("text", "kinds"), [
    ("Olá! Como posso ajudar você hoje?", set()),
    ("Você quer que eu solicite o reembolso?", set()),
    ("Você consegue me dizer quando fez a compra?", set()),
    ("Qual é o novo endereço que você quer cadastrar?", set()),
    ("Você pode devolver o produto em até sete dias após o recebimento.", set()),
    ("Em até 2 dias úteis um atendente te responde.", set()),
    ("Acredito que posso te ajudar com isso. Me conta o que houve.", set()),
    ("Oi, Caio! Tudo bem?", set()),
    ("Sem problemas, aguardo seu retorno.", set()),  # "retorno": a reply, not money coming back
    ("Para eu verificar, qual é o e-mail da sua conta?", set()),  # a question after a clause
    ("Se quiser, posso pedir a aprovação do reembolso.", set()),  # an offer
    ("Peço desculpas pelo ocorrido.", set()),
    ("Verifiquei aqui para você.", set()),
    ("Já estamos verificando.", set()),
    ("Fiquei preocupada com o que você contou.", set()),
    ("Você prefere que eu te ligue ou seguimos por aqui?", set()),
    ("Seu endereço foi atualizado.", {PROFILE}),
    ("Seu pedido saiu para entrega.", {MONEY, STATUS}),
])
def test_harmless_text_passes_and_kinds_are_named(text, kinds):
    assert findings(text) == kinds

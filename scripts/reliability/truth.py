"""Is every answer true, and does every party agree? Judged against the gateway's
own debit records read *after* everything settled — an answer is true when what it
told the customer about money matches what the gateway did with that request.

Rules (one per kind of answer the refund tool gives):

- ``executado``, or a repeat whose original outcome is ``executado``: the gateway
  debited this conversation's key, for the amount the answer states;
- ``recusado_pelo_gateway``, a repeat of a decline, ``gateway_indisponivel`` ("nada foi
  debitado"): the gateway holds no debit for this key;
- any answer whose message says the refund was processed/issued ("já foi processado",
  "emitido") needs a debit for the key — a decline repeated as "processed" is false;
- ``valor_excede_saldo``: false when the gateway debited this very key (the customer
  hears "no" about a refund that was made); otherwise true when the amount asked, added to
  what the gateway debited for the
  order under other keys, exceeds the order's value — or another key still held the
  balance unresolved (counted apart: true when said, not checkable after the fact);
- ``em_processamento`` / ``resultado_desconhecido``: promise nothing, always true;
- ``pedido_nao_encontrado`` for an order that exists: false;
- no answer (the process died or crashed): the customer was told nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

from cadencia_shared.ledger import refund_idempotency_key

from .fleet import Answer
from .world import OrderBook

SAYS_DONE = ("já foi processado", "emitido")


@dataclass
class Verdicts:
    counts: Counter = field(default_factory=Counter)
    false_answers: list[str] = field(default_factory=list)

    def add(self, verdict: str, answer: Answer, why: str = "") -> None:
        self.counts[verdict] += 1
        if verdict == "falsa":
            self.false_answers.append(f"{answer.label}: {why}")

    @property
    def answered(self) -> int:
        return self.counts["verdadeira"] + self.counts["falsa"] + self.counts["reserva_pendente"]


def judge(answer: Answer, book: OrderBook, verdicts: Verdicts) -> None:
    response = answer.response
    if response is None or "crash" in response:
        verdicts.add("sem_resposta", answer)
        return
    event = answer.event
    key = refund_idempotency_key(event["conversaId"], event["pedidoId"])
    debited = book.debited_for(key)
    if response.get("ok"):
        _judge_success(answer, response, debited, verdicts)
    else:
        _judge_refusal(answer, response, book, key, verdicts)


def _judge_success(answer: Answer, response: dict, debited: list[dict], verdicts: Verdicts) -> None:
    data = response.get("dados") or {}
    outcome = response.get("resultado")
    original = data.get("resultadoOriginal", outcome)
    says_done = original == "executado" or any(s in str(data.get("mensagem", "")) for s in SAYS_DONE)
    if says_done:
        amounts = {Decimal(d["valor"]) for d in debited}
        if not debited:
            verdicts.add("falsa", answer, f"disse '{outcome}/{original}' sem débito no gateway")
        elif Decimal(data.get("valor", "0")) not in amounts:
            verdicts.add("falsa", answer, f"disse R$ {data.get('valor')}, o gateway debitou {sorted(amounts)}")
        else:
            verdicts.add("verdadeira", answer)
    elif original in ("recusado_pelo_gateway", "recusado"):
        verdicts.add("falsa" if debited else "verdadeira", answer, "disse recusado, mas houve débito")
    else:  # em_processamento, resultado_desconhecido: nothing promised
        verdicts.add("verdadeira", answer)


def _judge_refusal(answer: Answer, response: dict, book: OrderBook, key: str, verdicts: Verdicts) -> None:
    code = (response.get("erro") or {}).get("codigo")
    if code == "gateway_indisponivel":
        verdicts.add("falsa" if book.debited_for(key) else "verdadeira", answer,
                     "disse 'nada foi debitado', mas o gateway debitou esta chave")
    elif code == "valor_excede_saldo" and book.debited_for(key):
        verdicts.add("falsa", answer, "recusou por saldo, mas o gateway debitou o pedido desta conversa")
    elif code == "valor_excede_saldo":
        asked = Decimal(str(answer.event["valor"]))
        others = sum((Decimal(d["valor"]) for d in book.gateway_debits if d["idempotencyKey"] != key), Decimal(0))
        if asked + others > book.order_value:
            verdicts.add("verdadeira", answer)
        else:
            verdicts.add("reserva_pendente", answer)
    elif code == "pedido_nao_encontrado":
        verdicts.add("falsa", answer, "disse que o pedido não existe")
    else:
        verdicts.add("verdadeira", answer)  # a typed refusal that claims nothing about money


def judge_all(answers: list[Answer], book: OrderBook, verdicts: Verdicts) -> None:
    for answer in answers:
        judge(answer, book, verdicts)

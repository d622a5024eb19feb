"""The ledger's stored format, pinned: every item kind's attribute names, types and keys.

Items are stored data (DESIGN.md §6): renaming a Python identifier must never rename
an attribute, a key prefix, a GSI value or a wire string. Each test drives the public
operations with a fixed clock, then compares the raw DynamoDB item (typed JSON, as
GetItem returns it) with a literal of today's format. Owner tokens (uuid4) are the
only values replaced, after checking their shape. moto in-process is enough: this is
about what is written, not about races (the ceiling/claim race tests prove those).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared import ledger as ledger_module
from cadencia_shared.ledger import (
    AttemptResult,
    ClaimStatus,
    ConversationStatus,
    ItemType,
    Ledger,
    MessageAnswered,
    approval_id,
    approval_pk,
    decision_pk,
    inbound,
    refund_idempotency_key,
    table_definition,
)
from tests.support.call_links import answer

from .support.moto_ledger import ledger_table_in_process

TABLE = "ledger-shapes"
CONV, ORDER = "conv-shapes", "PED-1001"
KEY = "conv-shapes#PED-1001#reembolso"
TOKEN = re.compile(r"\A[0-9a-f]{32}\Z")


def at(second: int) -> dict[str, str]:
    return {"S": f"2027-01-15T08:00:{second:02d}.000Z"}


class World:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.now = 1_800_000_000.0  # 2027-01-15T08:00:00Z
        self.ledger = Ledger(TABLE, client, clock=lambda: self.now)

    def tick(self) -> None:
        self.now += 1

    def item(self, pk: str) -> dict[str, Any]:
        """The stored item; an owner token becomes "<token>" once its shape is checked,
        the compressed message history becomes its JSON."""
        item = self.client.get_item(TableName=TABLE, Key={"pk": {"S": pk}}, ConsistentRead=True)["Item"]
        if "dono" in item:
            assert TOKEN.match(item["dono"]["S"]), item["dono"]
            item["dono"] = {"S": "<token>"}
        for compressed in ("mensagensZ", "respostas"):  # zlib-compressed JSON: shown decoded
            if compressed in item:
                item[compressed] = {"B": json.loads(zlib.decompress(item[compressed]["B"]))}
        return item


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    with ledger_table_in_process(monkeypatch, TABLE) as client:
        yield World(client)


def test_the_derived_keys_keep_their_shapes():
    assert refund_idempotency_key(CONV, ORDER) == KEY
    assert approval_id(CONV, "emitir_reembolso", "v1", "a" * 64) == "d3bcee851d5807bc94a8df266b175348"
    assert approval_pk("d3bcee851d5807bc94a8df266b175348") == "aprovacao#d3bcee851d5807bc94a8df266b175348"
    assert decision_pk("d3bcee851d5807bc94a8df266b175348") == "decisao#d3bcee851d5807bc94a8df266b175348"
    assert decision_pk("d3bc", first=True) == "decisao#d3bc#primeira"
    for bad in ("", "a#b"):
        with pytest.raises(ValueError):
            refund_idempotency_key(bad, ORDER)
        with pytest.raises(ValueError):
            approval_pk(bad)


def test_the_table_definition_and_the_stored_names():
    assert table_definition("t") == {
        "TableName": "t",
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "conversaId", "AttributeType": "S"},
            {"AttributeName": "registradoEm", "AttributeType": "S"},
            {"AttributeName": "pendencia", "AttributeType": "S"},
            {"AttributeName": "visitadoEm", "AttributeType": "S"},
        ],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [
            {"IndexName": "historicoPorConversa",
             "KeySchema": [{"AttributeName": "conversaId", "KeyType": "HASH"},
                           {"AttributeName": "registradoEm", "KeyType": "RANGE"}],
             "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["tipo"]}},
            {"IndexName": "pendenciasPorVisita",
             "KeySchema": [{"AttributeName": "pendencia", "KeyType": "HASH"},
                           {"AttributeName": "visitadoEm", "KeyType": "RANGE"}],
             "Projection": {"ProjectionType": "KEYS_ONLY"}},
        ],
    }
    stored = (ledger_module.TABLE_KEY, ledger_module.GSI_BY_CONVERSATION, ledger_module.GSI_UNSETTLED,
              ledger_module.LEGACY_GSI_BY_CONVERSATION, ledger_module.LEGACY_GSI_UNSETTLED,
              ledger_module.UNSETTLED_MARK, ledger_module.APPROVAL_PENDING_MARK, ledger_module.HUMAN_PENDING_MARK,
              ledger_module.TTL_ATTRIBUTE, ledger_module.INBOUND_TTL_S, ledger_module.ATTEMPT_EVENT,
              ledger_module.CANCELLATION_ATTRIBUTE, ledger_module.DETAIL_MAX, inbound.PROCESSING_ATTRIBUTE,
              inbound.ANSWERED_ATTRIBUTE, inbound.REPLIES_ATTRIBUTE)
    assert stored == ("pk", "historicoPorConversa", "pendenciasPorVisita", "porConversa", "reembolsosPendentes",
                      "reembolso", "aprovacao", "humano", "expiraEm",
                      7 * 24 * 3600, "TENTATIVA_DE_FERRAMENTA_REGISTRADA", "cancelamentoSolicitadoEm", 200,
                      "emProcessamento", "respondidas", "respostas")
    # No ``mensagem`` nor ``tentativa`` items any more: the inbound dedupe is on the
    # conversation item, an attempt's record on its counter item.
    assert {t.value for t in ItemType} == {"reivindicacao", "contador_tentativas", "conversa",
                                           "auditoria", "aprovacao", "primeiro_reembolso", "sessao",
                                           "interruptor", "decisao"}
    assert [s.value for s in ClaimStatus] == ["em_processamento", "envio_possivel", "em_conciliacao", "executado",
                                              "recusado_pelo_gateway", "desconhecido", "falhou_antes_do_gateway"]
    assert [s.value for s in ConversationStatus] == ["ativa", "aguardando_humano", "aguardando_aprovacao"]


CLAIM_COMMON = {
    "pk": {"S": "reivindicacao#" + KEY}, "tipo": {"S": "reivindicacao"}, "chaveIdempotencia": {"S": KEY},
    "conversaId": {"S": CONV}, "pedidoId": {"S": ORDER}, "clienteId": {"N": "7"}, "dono": {"S": "<token>"},
    "criadoEm": at(0),  # no registradoEm: the history reaches a claim through its counter
}


def test_a_claim_through_its_life(world: World):
    led = world.ledger
    claim = led.claim_refund(key=KEY, conversation_id=CONV, order_id=ORDER, customer_id=7,
                             amount=Decimal("150.00"), lease_s=30)
    assert world.item("reivindicacao#" + KEY) == {
        **CLAIM_COMMON, "valor": {"N": "150.00"}, "status": {"S": "em_processamento"}, "execucoes": {"N": "1"},
        "leaseAteMs": {"N": "1800000030000"}, "atualizadoEm": at(0), "pendencia": {"S": "reembolso"},
        "visitadoEm": at(0)}
    world.tick()
    claim = led.settle_claim(claim, ClaimStatus.SENDING)
    world.tick()
    claim = led.settle_claim(claim, ClaimStatus.UNKNOWN, detail="x" * 300, gateway_transaction="tx-1",
                             amount=Decimal("140.00"))
    assert world.item("reivindicacao#" + KEY) == {
        **CLAIM_COMMON, "valor": {"N": "140.00"}, "status": {"S": "desconhecido"}, "execucoes": {"N": "1"},
        "leaseAteMs": {"N": "1800000030000"}, "atualizadoEm": at(2), "pendencia": {"S": "reembolso"},
        "visitadoEm": at(2), "primeiroEnvioEm": at(1), "transacaoGateway": {"S": "tx-1"},
        "detalhe": {"S": "x" * 199 + "…"}}
    world.tick()
    claim = led.retake_claim(claim, amount=Decimal("140.00"), lease_s=30, status=ClaimStatus.RECONCILING)
    retaken = {
        **CLAIM_COMMON, "valor": {"N": "140.00"}, "status": {"S": "em_conciliacao"}, "execucoes": {"N": "2"},
        "leaseAteMs": {"N": "1800000033000"}, "atualizadoEm": at(3), "pendencia": {"S": "reembolso"},
        "visitadoEm": at(3), "primeiroEnvioEm": at(1), "transacaoGateway": {"S": "tx-1"}}
    assert world.item("reivindicacao#" + KEY) == retaken
    assert [c.status for c in led.unsettled_claims()] == [ClaimStatus.RECONCILING]
    world.tick()
    claim = led.settle_claim(claim, ClaimStatus.EXECUTED, gateway_transaction="tx-1")
    # the retake's visit is kept: the keys-only index entry is not written at all
    executed = {**retaken, "status": {"S": "executado"}, "atualizadoEm": at(4), "visitadoEm": at(3)}
    assert world.item("reivindicacao#" + KEY) == executed
    world.tick()
    led.mark_erp_updated(claim)
    settled = {k: v for k, v in executed.items() if k != "pendencia"}
    assert world.item("reivindicacao#" + KEY) == {**settled, "erpAtualizado": {"BOOL": True}}
    assert led.unsettled_claims() == []


def test_a_declined_claim_leaves_the_reconcilers_index_once_the_erp_agrees(world: World):
    claim = world.ledger.claim_refund(key=KEY, conversation_id=CONV, order_id=ORDER, customer_id=7,
                                      amount=Decimal("10.00"), lease_s=30)
    claim = world.ledger.settle_claim(claim, ClaimStatus.DECLINED, detail="saldo")
    item = world.item("reivindicacao#" + KEY)
    # still listed (its visit kept) until the ERP's release has committed
    assert item["pendencia"] == {"S": "reembolso"} and item["status"] == {"S": "recusado_pelo_gateway"}
    assert item["detalhe"] == {"S": "saldo"} and item["visitadoEm"] == at(0)
    world.ledger.mark_erp_updated(claim)
    item = world.item("reivindicacao#" + KEY)
    assert "pendencia" not in item and item["erpAtualizado"] == {"BOOL": True}
    assert world.ledger.unsettled_claims() == []


def test_the_first_refund_mark(world: World):
    assert world.ledger.first_refund_conversation(order_id=ORDER, conversation_id=CONV) == CONV
    assert world.ledger.first_refund_conversation(order_id=ORDER, conversation_id="conv-other") == CONV
    assert world.item("primeiro-reembolso#" + ORDER) == {
        "pk": {"S": "primeiro-reembolso#PED-1001"}, "tipo": {"S": "primeiro_reembolso"},
        "conversaDona": {"S": CONV}, "pedidoId": {"S": ORDER}, "criadoEm": at(0)}


def test_the_history_reaches_a_claim_through_its_counter_in_time_order(world: World):
    """A claim has no history-index entry of its own (one index write fewer per
    refund): ``history`` reads it by the key its counter names and places it at its
    creation time; a claim written with an entry (an older deploy) is listed once."""
    led = world.ledger
    led.register_attempt(conversation_id=CONV, subject=ORDER, tool="emitir_reembolso", ceiling=4,
                         order_id=ORDER, idempotency_key=KEY)
    world.tick()
    led.claim_refund(key=KEY, conversation_id=CONV, order_id=ORDER, customer_id=7, amount=Decimal("1.00"), lease_s=30)
    world.tick()
    event = led.append_audit(conversation_id=CONV, event="TESTE", details={})
    assert [i["pk"] for i in led.history(CONV)] == [
        "contador#conv-shapes#PED-1001#emitir_reembolso", "reivindicacao#" + KEY, f"auditoria#{event}"]
    assert [i["pk"] for i in led.history(CONV, item_type=ItemType.CLAIM)] == ["reivindicacao#" + KEY]
    assert [i["pk"] for i in led.history(CONV, item_type=ItemType.AUDIT)] == [f"auditoria#{event}"]
    world.client.update_item(TableName=TABLE, Key={"pk": {"S": "reivindicacao#" + KEY}},
                             UpdateExpression="SET registradoEm = :t", ExpressionAttributeValues={":t": at(1)})
    assert [i["pk"] for i in led.history(CONV, item_type=ItemType.CLAIM)] == ["reivindicacao#" + KEY]


def test_the_counter_holds_its_attempt_records(world: World):
    """One item per (conversation, subject, tool): the counter, the series' fields
    once, the history index's keys (set by the first attempt, never moved) and one
    record per attempt, appended by the write that numbered it."""
    led = world.ledger
    first = led.register_attempt(conversation_id=CONV, subject=ORDER, tool="emitir_reembolso", ceiling=1,
                                 order_id=ORDER, idempotency_key=KEY)
    refund_counter = {
        "pk": {"S": "contador#conv-shapes#PED-1001#emitir_reembolso"}, "tipo": {"S": "contador_tentativas"},
        "tentativas": {"N": "1"}, "atualizadoEm": at(0), "conversaId": {"S": CONV},
        "registradoEm": {"S": "2027-01-15T08:00:00.000Z#contador_tentativas#PED-1001#emitir_reembolso"},
        "assunto": {"S": ORDER}, "ferramenta": {"S": "emitir_reembolso"}, "pedidoId": {"S": ORDER},
        "chaveIdempotencia": {"S": KEY}, "registros": {"L": [{"M": {"timestamp": at(0), "teto": {"N": "1"}}}]}}
    assert world.item("contador#conv-shapes#PED-1001#emitir_reembolso") == refund_counter
    world.tick()
    answer(led, first, AttemptResult.EXECUTED, "d" * 600)
    # The outcome is written once, on the call's link: the counter item is not touched.
    assert world.item("contador#conv-shapes#PED-1001#emitir_reembolso") == refund_counter
    (joined,) = [a for a in led.attempts(CONV) if a["assunto"] == ORDER]
    assert (joined["resultado"], joined["detalhe"]) == ("executado", "d" * 500)
    for _ in range(2):
        led.register_attempt(conversation_id=CONV, subject="status", tool="consultar_status_pedido", ceiling=1)
    assert world.item("contador#conv-shapes#status#consultar_status_pedido") == {
        "pk": {"S": "contador#conv-shapes#status#consultar_status_pedido"}, "tipo": {"S": "contador_tentativas"},
        "tentativas": {"N": "2"}, "atualizadoEm": at(1), "conversaId": {"S": CONV},
        "registradoEm": {"S": "2027-01-15T08:00:01.000Z#contador_tentativas#status#consultar_status_pedido"},
        "assunto": {"S": "status"}, "ferramenta": {"S": "consultar_status_pedido"},
        "registros": {"L": [{"M": {"timestamp": at(1), "teto": {"N": "1"}}}] * 2}}
    assert [(a["assunto"], a["tentativaNumero"], a["decisao"], a["resultado"]) for a in led.attempts(CONV)] == [
        (ORDER, 1, "permitida", "executado"), ("status", 1, "permitida", "pendente"),
        ("status", 2, "bloqueada_por_teto", "bloqueado_por_teto")]
    assert led.attempt_results(conversation_id=CONV, subject=ORDER, tool="emitir_reembolso", limit=1) == ["executado"]


def test_refusals_past_the_listed_ones_are_numbered_not_listed(world: World):
    """The item stays bounded: ``ceiling`` + ``REFUSALS_LISTED`` records, then every
    further attempt is numbered by its own ADD, refused, and only counted."""
    from cadencia_shared.ledger.attempts import REFUSALS_LISTED

    numbers = [led_attempt.number for led_attempt in (
        world.ledger.register_attempt(conversation_id=CONV, subject=ORDER, tool="emitir_reembolso", ceiling=2)
        for _ in range(2 + REFUSALS_LISTED + 3))]
    assert numbers == list(range(1, 2 + REFUSALS_LISTED + 4))
    item = world.item("contador#conv-shapes#PED-1001#emitir_reembolso")
    assert len(item["registros"]["L"]) == 2 + REFUSALS_LISTED
    assert item["tentativas"] == {"N": str(2 + REFUSALS_LISTED + 3)} and item["recusasNaoListadas"] == {"N": "3"}
    # A later, larger ceiling never re-opens a series whose list stopped matching its numbers.
    late = world.ledger.register_attempt(conversation_id=CONV, subject=ORDER, tool="emitir_reembolso", ceiling=50)
    assert late.number == 2 + REFUSALS_LISTED + 4 and not late.allowed


CONVERSATION_COMMON = {"pk": {"S": "conversa#conv-shapes"}, "tipo": {"S": "conversa"}, "clienteId": {"N": "7"},
                       "criadoEm": at(0)}


def test_a_conversation_and_its_inbound_message(world: World):
    """The lease claims the message (``emProcessamento``: its key, base64url of
    SHA-256[:9]); the commit records it answered, with its reply, on the same item."""
    led = world.ledger
    assert inbound.message_key("wamid.1") == "2i9_jWFxxLN8"
    state = led.acquire_conversation(conversation_id=CONV, customer_id=7, lease_s=60, message_id="wamid.1")
    assert world.item("conversa#conv-shapes") == {
        **CONVERSATION_COMMON, "status": {"S": "ativa"}, "versao": {"N": "1"}, "dono": {"S": "<token>"},
        "leaseAteMs": {"N": "1800000060000"}, "emProcessamento": {"S": "2i9_jWFxxLN8"}}
    world.tick()
    state = led.commit_conversation(state, messages=[{"role": "user", "content": "olá"}],
                                    status=ConversationStatus.WAITING_HUMAN, reply={"texto": "ok"})
    answered = {"respondidas": {"M": {"2i9_jWFxxLN8": {"N": "1800000001"}}},
                "respostas": {"B": {"2i9_jWFxxLN8": {"v": 1, "r": {"texto": "ok"}}}},
                "mensagensDoCliente": {"N": "1"}}  # customer messages answered, ever (never cut)
    waiting = {**CONVERSATION_COMMON, "status": {"S": "aguardando_humano"}, "versao": {"N": "2"},
               "turnos": {"N": "1"}, "atualizadoEm": at(1), "mensagensZ": {"B": [{"role": "user", "content": "olá"}]},
               "pendencia": {"S": "humano"}, "registradoEm": at(1), "visitadoEm": at(1), **answered}
    assert world.item("conversa#conv-shapes") == waiting
    with pytest.raises(MessageAnswered) as redelivered:
        led.acquire_conversation(conversation_id=CONV, customer_id=7, lease_s=60, message_id="wamid.1")
    assert (redelivered.value.reply, redelivered.value.status) == ({"texto": "ok"}, "aguardando_humano")
    assert world.item("conversa#conv-shapes") == waiting  # the refused lease wrote nothing
    assert led.waiting_for_a_person() == [(CONV, "2027-01-15T08:00:01.000Z")]
    assert led.request_cancellation(CONV) and led.cancellation_pending(CONV)
    assert world.item("conversa#conv-shapes") == {**waiting, "cancelamentoSolicitadoEm": at(1)}
    world.tick()
    state = led.acquire_conversation(conversation_id=CONV, customer_id=7, lease_s=60)  # no message: no claim
    led.commit_conversation(state, messages=[], status=ConversationStatus.ACTIVE, cancelled=True)
    assert world.item("conversa#conv-shapes") == {
        **CONVERSATION_COMMON, "status": {"S": "ativa"}, "versao": {"N": "4"}, "turnos": {"N": "2"},
        "atualizadoEm": at(2), "mensagensZ": {"B": []}, **answered}
    assert led.waiting_for_a_person() == [] and not led.cancellation_pending(CONV)


def test_a_failed_inbound_message(world: World):
    """A release drops the lease and the claim only: the message is new again."""
    state = world.ledger.acquire_conversation(conversation_id=CONV, customer_id=7, lease_s=60, message_id="wamid.2")
    world.tick()
    world.ledger.release_conversation(state)
    assert world.item("conversa#conv-shapes") == {
        **CONVERSATION_COMMON, "status": {"S": "ativa"}, "versao": {"N": "1"}}
    again = world.ledger.acquire_conversation(conversation_id=CONV, customer_id=7, lease_s=60, message_id="wamid.2")
    assert world.item("conversa#conv-shapes")["emProcessamento"] == {"S": "qFjqUm2agxBo"} and again.version == 2


def test_audit_records_without_a_chain(world: World):
    event = world.ledger.append_audit(conversation_id=CONV, event="TESTE", details={"valor": Decimal("1.5"), "ação": 1})
    assert TOKEN.match(event)
    assert world.item(f"auditoria#{event}") == {
        "pk": {"S": f"auditoria#{event}"}, "tipo": {"S": "auditoria"}, "evento": {"S": "TESTE"},
        "conversaId": {"S": CONV}, "timestamp": at(0), "detalhes": {"S": '{"valor": "1.5", "ação": 1}'},
        "registradoEm": {"S": f"2027-01-15T08:00:00.000Z#auditoria#{event}"}}
    unbound = world.ledger.append_audit(conversation_id=None, event="GLOBAL", details={})
    assert world.item(f"auditoria#{unbound}") == {
        "pk": {"S": f"auditoria#{unbound}"}, "tipo": {"S": "auditoria"}, "evento": {"S": "GLOBAL"},
        "timestamp": at(0), "detalhes": {"S": "{}"}}
    assert [i["pk"] for i in world.ledger.history(CONV)] == [f"auditoria#{event}"]


def test_an_approval_request_written_through_the_ledgers_table(world: World):
    from cadencia_shared.approvals import ApprovalStore

    from .support.approval_wait import awaiting

    store = ApprovalStore(world.ledger)
    record, created = store.request(tool="emitir_reembolso", version="v1", arguments={"valor": Decimal("500")},
                                    conversation_id=CONV, customer_id=7, amount=Decimal("500.00"),
                                    reason="acima_do_limite", validity_s=600)
    assert created and [r.id for r in store.pending()] == [record.id]
    sort = f"2027-01-15T08:00:00.000Z#aprovacao#{record.id}"
    pending = {
        "pk": {"S": f"aprovacao#{record.id}"}, "tipo": {"S": "aprovacao"}, "aprovacaoId": {"S": record.id},
        "ferramenta": {"S": "emitir_reembolso"}, "versaoFerramenta": {"S": "v1"},
        "argumentos": {"S": '{"valor":500.0}'}, "argumentosSha256": {"S": record.arguments_sha256},
        "conversaId": {"S": CONV}, "clienteId": {"N": "7"}, "valor": {"N": "500.00"},
        "motivo": {"S": "acima_do_limite"}, "status": {"S": "pendente"}, "criadoEm": at(0),
        "expiraEmMs": {"N": "1800000600000"}, "registradoEm": {"S": sort}, "pendencia": {"S": "aprovacao"},
        "visitadoEm": {"S": sort}, "expiraEm": {"N": str(1_800_000_600 + 90 * 24 * 3600)}}
    assert world.item(f"aprovacao#{record.id}") == pending
    world.tick()
    # A decision is recorded only while its conversation waits for it.
    waiting = world.ledger.acquire_conversation(conversation_id=CONV, customer_id=7, lease_s=30)
    world.ledger.commit_conversation(waiting, messages=[awaiting(record.id)],
                                     status=ConversationStatus.WAITING_APPROVAL)
    store.decide(record.id, approve=True, approver="ana", justification="ok", allowed_approvers=frozenset({"ana"}))
    # Approved: out of the operators' list, under the sweep's mark until it is consumed.
    decided = pending | {"status": {"S": "aprovada"}, "decididoPor": {"S": "ana"}, "justificativa": {"S": "ok"},
                         "decididoEm": at(1), "pendencia": {"S": "aprovacao_aprovada"}}
    assert world.item(f"aprovacao#{record.id}") == decided
    # The decision that authorises: its own item, written once by the decision role.
    assert world.item(f"decisao#{record.id}") == {
        "pk": {"S": f"decisao#{record.id}"}, "tipo": {"S": "decisao"}, "aprovacaoId": {"S": record.id},
        "conversaId": {"S": CONV}, "ferramenta": {"S": "emitir_reembolso"}, "versaoFerramenta": {"S": "v1"},
        "argumentosSha256": {"S": record.arguments_sha256}, "expiraEmMs": {"N": "1800000600000"},
        "decisao": {"S": "aprovada"}, "aprovadores": {"L": [{"S": "ana"}]}, "aprovadoresExigidos": {"N": "1"},
        "decididoEm": at(1), "expiraEm": {"N": str(1_800_000_600 + 90 * 24 * 3600)}}
    assert [r.id for r in store.pending()] == [] and [r.id for r in store.approved()] == [record.id]
    world.tick()
    assert store.consume(store.get(record.id)) and not store.consume(store.get(record.id))
    consumed = {k: v for k, v in decided.items() if k != "pendencia"}
    assert world.item(f"aprovacao#{record.id}") == {**consumed, "status": {"S": "consumida"}, "consumidaEm": at(2)}
    assert store.approved() == []


def test_a_lost_claim_reads_back_the_winner(world: World):
    from cadencia_shared.ledger import ClaimTaken

    world.ledger.claim_refund(key=KEY, conversation_id=CONV, order_id=ORDER, customer_id=7,
                              amount=Decimal("150.00"), lease_s=30)
    with pytest.raises(ClaimTaken) as lost:
        world.ledger.claim_refund(key=KEY, conversation_id=CONV, order_id=ORDER, customer_id=7,
                                  amount=Decimal("1.00"), lease_s=30)
    assert (lost.value.existing.status, lost.value.existing.amount) == (ClaimStatus.IN_PROGRESS, Decimal("150.00"))


_ids = st.text(min_size=1, max_size=12)


@given(a=st.tuples(_ids, _ids, _ids), b=st.tuples(_ids, _ids, _ids))
@settings(max_examples=300, deadline=None)
def test_key_builders_are_injective_or_refuse(a, b):
    """Two different (conversation, subject, tool) never share a counter key:
    an id holding the separator (or empty) is refused, whatever else it holds."""
    from cadencia_shared.ledger.table import counter_pk

    if any("#" in part for part in a + b):
        with pytest.raises(ValueError):
            counter_pk(*a) if any("#" in part for part in a) else counter_pk(*b)
        return
    assert (counter_pk(*a) == counter_pk(*b)) == (a == b)
    assert refund_idempotency_key(a[0], a[1]) != refund_idempotency_key(b[0], b[1]) or a[:2] == b[:2]

"""emitir_reembolso: exactly-once against mock_aws, the real PostgreSQL (as the
refund user) and the real loopback gateway (debits counted at the server)."""

from __future__ import annotations

import threading
import time
import uuid
from decimal import Decimal

import pytest
from botocore.exceptions import ClientError

from cadencia_shared import ledger as ledger_mod
from cadencia_shared.catalog import EMITIR_REEMBOLSO
from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from emitir_reembolso import handler as refund_handler
from emitir_reembolso.settings import RefundSettings
from orchestrator.invokers.local import function_environment

from .support.seal_harness import ledger_items


def _event(conv: str | None = None, **overrides):
    event = {"conversaId": conv or f"conv-{uuid.uuid4().hex[:8]}", "clienteId": 1001, "pedidoId": "4821", "valor": 50.0}
    event.update(overrides)
    return event


class CallLog:
    """botocore before-call hooks: the order of AWS operations the handler made."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, model, **_):
        self.calls.append(model.name)

    def count(self, name: str) -> int:
        return self.calls.count(name)


@pytest.fixture
def call_log(tools) -> CallLog:
    log = CallLog()
    with function_environment(tools.environment(EMITIR_REEMBOLSO)):
        wired = refund_handler.adapters(RefundSettings.from_env())
    wired.ledger.client.meta.events.register("before-call.dynamodb.*", log)
    wired.secrets_client.meta.events.register("before-call.secrets-manager.*", log)
    return log


def _refund_row(erp, pedido="4821"):
    return erp.execute(
        "SELECT valor_reembolsado, status_reembolso FROM pedidos WHERE id = %s", (pedido,)
    ).fetchone()


def test_first_call_debits_once_and_updates_the_erp(tools, gateway, erp, call_log):
    event = _event()
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["ok"] is True and out["resultado"] == "executado"
    key = refund_idempotency_key(event["conversaId"], "4821")
    assert out["dados"]["chaveIdempotencia"] == key
    debits = gateway.debits()
    assert [(d["idempotencyKey"], d["valor"]) for d in debits] == [(key, "50.00")]
    assert _refund_row(erp) == (Decimal("50.00"), "reembolsado_parcial")
    assert erp.execute("SELECT status, valor FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone() == (
        "executado", Decimal("50.00"))


def test_claim_is_written_before_the_secret_is_read(tools, gateway, call_log):
    tools(EMITIR_REEMBOLSO, _event())
    # The conditional PutItem (claim) precedes the first GetSecretValue.
    assert "PutItem" in call_log.calls and "GetSecretValue" in call_log.calls
    assert call_log.calls.index("PutItem") < call_log.calls.index("GetSecretValue")


def test_repeat_is_blocked_without_reading_the_secret_or_calling_the_gateway(tools, gateway, erp, call_log):
    event = _event()
    first = tools(EMITIR_REEMBOLSO, event)
    reads_after_first = call_log.count("GetSecretValue")
    gateway_calls_after_first = gateway.stats()["reembolso"]

    second = tools(EMITIR_REEMBOLSO, event)
    assert second["ok"] is True and second["resultado"] == "bloqueado_por_idempotencia"
    assert second["dados"]["resultadoOriginal"] == "executado"
    assert second["dados"]["transacao"] == first["dados"]["transacao"]
    assert call_log.count("GetSecretValue") == reads_after_first  # zero secret reads on the repeat
    assert gateway.stats()["reembolso"] == gateway_calls_after_first  # zero gateway calls (counted at the server)
    assert len(gateway.debits()) == 1
    assert _refund_row(erp)[0] == Decimal("50.00")  # the ERP did not add it twice


def test_repeat_even_when_balance_is_exhausted_reports_the_original(tools, gateway):
    event = _event(valor=189.90)  # the whole order
    assert tools(EMITIR_REEMBOLSO, event)["resultado"] == "executado"
    again = tools(EMITIR_REEMBOLSO, event)
    assert again["resultado"] == "bloqueado_por_idempotencia"
    assert len(gateway.debits()) == 1


SEAL_REFUSES = {"valor-texto": 2004, "conversaId-forjado": 1001}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"valor": -10}, "valor"),
        ({"valor": 0}, "valor"),
        ({"valor": 10.001}, "valor"),
        ({"valor": "NaN"}, "valor-texto"),
        ({"pedidoId": "48#21"}, "pedidoId"),
        ({"conversaId": "a#b"}, "conversaId-forjado"),
        ({"clienteId": 0}, "clienteId"),
        ({"extra": "campo"}, "extra"),
    ],
)
def test_invalid_input_is_a_typed_error_and_changes_nothing(tools, gateway, mocked_aws, change, field):
    out = tools(EMITIR_REEMBOLSO, _event(**change))
    assert out["ok"] is False
    if field in SEAL_REFUSES:
        # Refused at the edge, before the model's parse: an identity no turn could bind
        # opens no session (1001); an amount that is no number counts as above any limit (2004).
        assert out["erro"]["codigo"] == "selo_recusado"
        assert out["erro"]["detalhes"]["codigo"] == SEAL_REFUSES[field]
    else:
        assert out["erro"]["codigo"] == "entrada_invalida"
        assert field in out["erro"]["mensagem"]
    assert gateway.stats()["reembolso"] == 0
    assert not ledger_items(mocked_aws["dynamodb"])


def test_missing_field_is_a_typed_error(tools, gateway):
    event = _event()
    del event["pedidoId"]
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["erro"]["codigo"] == "entrada_invalida"
    del event["valor"]  # no amount: above any limit for the edge (2004), before the model's parse
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["erro"]["codigo"] == "selo_recusado" and out["erro"]["detalhes"]["codigo"] == 2004


def test_unknown_and_foreign_orders_get_the_same_error(tools, gateway, mocked_aws):
    unknown = tools(EMITIR_REEMBOLSO, _event(pedidoId="9999"))
    foreign = tools(EMITIR_REEMBOLSO, _event(pedidoId="5100"))  # belongs to customer 1002
    assert unknown["erro"]["codigo"] == foreign["erro"]["codigo"] == "pedido_nao_encontrado"
    assert unknown["erro"]["mensagem"].replace("9999", "X") == foreign["erro"]["mensagem"].replace("5100", "X")
    assert gateway.stats()["reembolso"] == 0
    assert not ledger_items(mocked_aws["dynamodb"])


def test_amount_above_balance_is_refused_before_any_claim(tools, gateway, mocked_aws):
    out = tools(EMITIR_REEMBOLSO, _event(valor=189.91))
    assert out["erro"]["codigo"] == "valor_excede_saldo"
    assert out["erro"]["detalhes"]["saldo"] == "189.90"
    assert not ledger_items(mocked_aws["dynamodb"])
    assert gateway.stats()["reembolso"] == 0


def test_balance_accounts_for_refunds_of_other_conversations(tools, gateway):
    assert tools(EMITIR_REEMBOLSO, _event(valor=150))["resultado"] == "executado"
    out = tools(EMITIR_REEMBOLSO, _event(valor=40))  # 189.90 - 150 = 39.90 left
    assert out["erro"]["codigo"] == "valor_excede_saldo"
    assert tools(EMITIR_REEMBOLSO, _event(valor=39.90))["resultado"] == "executado"
    assert len(gateway.debits()) == 2


def test_gateway_unreachable_is_not_reported_as_already_processed(tools, gateway, mocked_aws):
    event = _event()
    tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_URL": "http://127.0.0.1:9"}  # nothing listens there
    down = tools(EMITIR_REEMBOLSO, event)
    assert down["ok"] is False and down["erro"]["codigo"] == "gateway_indisponivel"
    claim = mocked_aws["ledger"].get_claim(refund_idempotency_key(event["conversaId"], "4821"))
    assert claim.status is ClaimStatus.FAILED_BEFORE_GATEWAY

    tools.overrides.clear()
    retry = tools(EMITIR_REEMBOLSO, event)
    assert retry["resultado"] == "executado"  # retaken, not "already processed"
    assert len(gateway.debits()) == 1


def test_secret_unavailable_releases_the_claim(tools, gateway, mocked_aws):
    event = _event()
    tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_SECRET_NAME": "nao/existe"}
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["erro"]["codigo"] == "gateway_indisponivel"
    claim = mocked_aws["ledger"].get_claim(refund_idempotency_key(event["conversaId"], "4821"))
    assert claim.status is ClaimStatus.FAILED_BEFORE_GATEWAY
    tools.overrides.clear()
    assert tools(EMITIR_REEMBOLSO, event)["resultado"] == "executado"
    assert len(gateway.debits()) == 1


@pytest.mark.parametrize("fault", ["erro_500_apos_debito", "timeout_apos_debito"])
def test_ambiguous_answer_after_the_debit_is_reconciled_not_redebited(tools, gateway, erp, fault):
    tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_TIMEOUT_S": "1"}
    gateway.inject(fault, delay_s=2.5)
    event = _event()
    out = tools(EMITIR_REEMBOLSO, event)
    # The lookup by key finds the debit the ambiguous answer hid.
    assert out["resultado"] == "executado"
    again = tools(EMITIR_REEMBOLSO, event)
    assert again["resultado"] == "bloqueado_por_idempotencia"
    assert len(gateway.debits()) == 1
    assert _refund_row(erp)[0] == Decimal("50.00")


def test_500_before_any_debit_leaves_an_unknown_claim_that_is_reconciled(tools, gateway, mocked_aws):
    gateway.inject("erro_500", times=2)  # the POST and its immediate re-send both fail
    event = _event()
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["resultado"] == "resultado_desconhecido"
    text = out["dados"]["mensagem"]
    assert "emitido" not in text and "nada foi debitado" not in text and "processado" not in text
    claim = mocked_aws["ledger"].get_claim(refund_idempotency_key(event["conversaId"], "4821"))
    assert claim.status is ClaimStatus.UNKNOWN
    # Next attempt re-sends the same request: the gateway performs it, once.
    retry = tools(EMITIR_REEMBOLSO, event)
    assert retry["resultado"] == "bloqueado_por_idempotencia" and retry["dados"]["conciliado"] is True
    assert retry["dados"]["resultadoOriginal"] == "executado"
    assert len(gateway.debits()) == 1


def test_declined_refund_is_final_and_repeats_report_it(tools, gateway, erp):
    gateway.inject("recusar")
    event = _event()
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["resultado"] == "recusado_pelo_gateway"
    again = tools(EMITIR_REEMBOLSO, event)
    assert again["resultado"] == "bloqueado_por_idempotencia"
    assert again["dados"]["resultadoOriginal"] == "recusado_pelo_gateway"
    assert "processado" not in again["dados"]["mensagem"] and "emitido" not in again["dados"]["mensagem"]
    assert "recusado" in again["dados"]["mensagem"]
    assert gateway.debits() == []
    assert _refund_row(erp)[0] == Decimal("0.00")


def test_claim_in_progress_under_lease_blocks_without_touching_anything(tools, gateway, mocked_aws, call_log):
    event = _event()
    ledger = mocked_aws["ledger"]
    ledger.claim_refund(key=refund_idempotency_key(event["conversaId"], "4821"), conversation_id=event["conversaId"],
                        order_id="4821", customer_id=1001, amount=Decimal("50"), lease_s=60)
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["resultado"] == "em_processamento"
    assert call_log.count("GetSecretValue") == 0
    assert gateway.stats()["reembolso"] == 0 and gateway.stats()["consulta"] == 0


def test_abandoned_claim_that_did_debit_is_reconciled_by_resending(tools, gateway, mocked_aws, local_stack):
    """A Lambda died after the gateway debited but before recording it: its claim
    says a send may have happened, so the retry re-sends the same request and the
    gateway answers the original (a replay), without a lookup or a second debit."""
    from emitir_reembolso.gateway import PaymentGatewayClient

    event = _event()
    key = refund_idempotency_key(event["conversaId"], "4821")
    # A minute ago: the claim's 30 s lease is over, and it is well inside the
    # gateway's idempotency window (past it, a claim is never re-sent).
    clock = [time.time() - 60]
    ledger = ledger_mod.Ledger("cadencia-agente-execucoes", mocked_aws["dynamodb"], clock=lambda: clock[0])
    claim = ledger.claim_refund(key=key, conversation_id=event["conversaId"], order_id="4821", customer_id=1001,
                                amount=Decimal("50.00"), lease_s=30)
    ledger.settle_claim(claim, ClaimStatus.SENDING)
    PaymentGatewayClient(local_stack.gateway_url, 2).refund(
        idempotency_key=key, order_id="4821", amount=Decimal("50.00"), token=local_stack.gateway_token
    )
    out = tools(EMITIR_REEMBOLSO, {**event, "valor": 20.0})  # the retry's new amount is never sent
    assert out["resultado"] == "bloqueado_por_idempotencia"
    assert out["dados"]["conciliado"] is True and out["dados"]["valor"] == "50.00"
    assert len(gateway.debits()) == 1
    assert gateway.stats()["consulta"] == 0 and gateway.stats()["reembolso"] == 2


def test_abandoned_claim_that_never_reached_the_gateway_is_executed_once(tools, gateway, mocked_aws):
    event = _event()
    key = refund_idempotency_key(event["conversaId"], "4821")
    ledger = ledger_mod.Ledger("cadencia-agente-execucoes", mocked_aws["dynamodb"], clock=lambda: 1_000_000.0)
    ledger.claim_refund(key=key, conversation_id=event["conversaId"], order_id="4821", customer_id=1001,
                        amount=Decimal("50.00"), lease_s=30)
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["resultado"] == "executado"
    assert len(gateway.debits()) == 1


def test_concurrent_repeats_debit_once(tools, gateway, mocked_aws, local_stack):
    """Five invocations at once, each with its own DB connection (as five Lambda
    environments would have): the order's row lock and the conditional claim let
    exactly one reach the gateway; the others see it in progress or done."""
    import psycopg

    from emitir_reembolso.gateway import PaymentGatewayClient
    from emitir_reembolso.logic import RefundService
    from emitir_reembolso.models import RefundRequest
    from emitir_reembolso.repository import RefundOrders

    request = RefundRequest.model_validate(_event())
    barrier = threading.Barrier(5)
    results: list[str] = []

    def run():
        with psycopg.connect(local_stack.postgres.user_conninfo("cadencia_agente_reembolso")) as conn:
            service = RefundService(
                ledger=mocked_aws["ledger"],
                orders=RefundOrders(conn),
                gateway=PaymentGatewayClient(local_stack.gateway_url, 3),
                read_gateway_token=lambda: local_stack.gateway_token,
                claim_lease_s=30,
            )
            barrier.wait()
            results.append(service.issue(request).resultado)

    threads = [threading.Thread(target=run) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("executado") == 1
    assert set(results) <= {"executado", "em_processamento", "bloqueado_por_idempotencia"}
    assert len(gateway.debits()) == 1


def test_refund_user_cannot_touch_other_columns(local_stack, erp):
    import psycopg

    with (psycopg.connect(local_stack.postgres.user_conninfo("cadencia_agente_reembolso")) as conn,
          pytest.raises(psycopg.errors.InsufficientPrivilege)):
        conn.execute("UPDATE pedidos SET valor_pedido = 1 WHERE id = '4821'")


def test_fenced_settle_fails_for_a_stale_owner(mocked_aws):
    ledger = mocked_aws["ledger"]
    claim = ledger.claim_refund(key="c-1#p-1#reembolso", conversation_id="c-1", order_id="p-1", customer_id=1,
                                amount=Decimal("1"), lease_s=1)
    ledger.settle_claim(claim, ClaimStatus.FAILED_BEFORE_GATEWAY)
    current = ledger.get_claim("c-1#p-1#reembolso")
    ledger.retake_claim(current, amount=Decimal("1"), lease_s=1)
    with pytest.raises(ledger_mod.ClaimLost):
        ledger.settle_claim(claim, ClaimStatus.EXECUTED)  # the old owner lost the claim
    with pytest.raises(ledger_mod.ClaimTaken):
        ledger.retake_claim(current, amount=Decimal("1"), lease_s=1)  # the same takeover cannot win twice


def test_conditional_claim_cannot_be_won_twice(mocked_aws):
    ledger = mocked_aws["ledger"]
    args = dict(key="c-2#p-2#reembolso", conversation_id="c-2", order_id="p-2", customer_id=1, amount=Decimal("1"),
                lease_s=30)
    first = ledger.claim_refund(**args)
    with pytest.raises(ledger_mod.ClaimTaken) as taken:
        ledger.claim_refund(**args)
    assert taken.value.existing.owner == first.owner


def test_unhandled_database_error_is_a_crash_not_a_typed_answer(tools, gateway):
    tools.overrides[EMITIR_REEMBOLSO.name] = {"DB_PASSWORD": "wrong"}
    with pytest.raises(Exception) as err:
        from cadencia_shared import db

        db.close_all()
        tools(EMITIR_REEMBOLSO, _event())
    assert "password authentication failed" in str(err.value)
    assert gateway.stats()["reembolso"] == 0
    assert not isinstance(err.value, ClientError)


def test_secret_failure_while_reconciling_keeps_the_claim_unknown(tools, gateway, mocked_aws):
    """An earlier attempt may have debited: a secret outage during reconciliation
    must neither turn the claim into 'failed before the gateway' nor tell the
    customer that nothing was debited."""
    event = _event()
    key = refund_idempotency_key(event["conversaId"], "4821")
    ledger = ledger_mod.Ledger("cadencia-agente-execucoes", mocked_aws["dynamodb"])
    claim = ledger.claim_refund(key=key, conversation_id=event["conversaId"], order_id="4821", customer_id=1001,
                                amount=Decimal("50.00"), lease_s=30)
    ledger.settle_claim(claim, ClaimStatus.UNKNOWN, detail="timeout")
    tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_SECRET_NAME": "nao/existe"}
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["ok"] is True and out["resultado"] == "resultado_desconhecido"
    assert "nada foi debitado" not in out["dados"]["mensagem"]
    assert ledger.get_claim(key).status is ClaimStatus.UNKNOWN


def test_reconciliation_records_the_amount_the_gateway_debited(tools, gateway, mocked_aws, local_stack, erp):
    """The gateway holds the key with 30.00 (a lost earlier attempt); the claim was
    retaken for 50.00: the 422 is reconciled and the ledger and ERP say 30.00."""
    from emitir_reembolso.gateway import PaymentGatewayClient

    event = _event(valor=50)
    key = refund_idempotency_key(event["conversaId"], "4821")
    ledger = ledger_mod.Ledger("cadencia-agente-execucoes", mocked_aws["dynamodb"])
    claim = ledger.claim_refund(key=key, conversation_id=event["conversaId"], order_id="4821", customer_id=1001,
                                amount=Decimal("30.00"), lease_s=30)
    ledger.settle_claim(claim, ClaimStatus.FAILED_BEFORE_GATEWAY)  # what a wrong "nothing sent" would leave
    PaymentGatewayClient(local_stack.gateway_url, 2).refund(
        idempotency_key=key, order_id="4821", amount=Decimal("30.00"), token=local_stack.gateway_token)
    out = tools(EMITIR_REEMBOLSO, event)
    assert out["resultado"] == "executado" and out["dados"]["valor"] == "30.00"
    assert ledger.get_claim(key).amount == Decimal("30.00")
    assert _refund_row(erp)[0] == Decimal("30.00")
    assert len(gateway.debits()) == 1


def test_an_unknown_outcome_in_one_conversation_holds_the_balance_for_others(tools, gateway, mocked_aws, erp):
    """Conversation A's refund was debited but its answer was lost (timeout, then the
    lookup failed too): its reservation keeps holding the amount, so conversation B
    cannot refund the same money again; A's retry reconciles and the ERP adds once."""
    tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_TIMEOUT_S": "1"}
    gateway.inject("timeout_apos_debito", delay_s=2.5)
    a, b = _event(valor=189.90), _event(valor=189.90)
    first = tools(EMITIR_REEMBOLSO, a)  # POST times out; the re-send right after gets the original
    assert first["resultado"] == "executado"  # (the timeout path reconciles immediately)

    # Now make A's outcome truly unknown: debit lost in a timeout AND the re-send failing.
    c = _event(pedidoId="4822", valor=59.00)
    gateway.inject("timeout_apos_debito", delay_s=2.5)
    gateway.inject("erro_500")  # the immediate re-send fails too
    unknown = tools(EMITIR_REEMBOLSO, c)
    assert unknown["resultado"] == "resultado_desconhecido"
    other = tools(EMITIR_REEMBOLSO, {**c, "conversaId": c["conversaId"] + "-b"})
    assert other["ok"] is False and other["erro"]["codigo"] == "valor_excede_saldo"  # the balance is held
    assert other["erro"]["detalhes"]["saldo"] == "0.00"
    retry = tools(EMITIR_REEMBOLSO, c)  # A asks again: reconciled, not re-debited
    assert retry["resultado"] == "bloqueado_por_idempotencia" and retry["dados"]["conciliado"] is True
    debits = {d["idempotencyKey"]: d["valor"] for d in gateway.debits()}
    assert sorted(debits.values()) == ["189.90", "59.00"]
    assert _refund_row(erp, "4822") == (Decimal("59.00"), "reembolsado")
    assert _refund_row(erp, "4821") == (Decimal("189.90"), "reembolsado")
    assert b  # (a second full refund of 4821 is refused as well)
    assert tools(EMITIR_REEMBOLSO, b)["erro"]["codigo"] == "valor_excede_saldo"


def test_erp_repair_after_a_lost_flag_adds_once_even_after_other_refunds(tools, gateway, mocked_aws, erp):
    """C's ERP write committed but its ledger flag was lost; D refunds later; C's
    repeat repairs nothing twice (the guard is per key, not 'the last key')."""
    c, d = _event(valor=30), _event(valor=30)
    assert tools(EMITIR_REEMBOLSO, c)["resultado"] == "executado"
    key_c = refund_idempotency_key(c["conversaId"], "4821")
    mocked_aws["dynamodb"].update_item(  # as if mark_erp_updated had been throttled
        TableName="cadencia-agente-execucoes", Key={"pk": {"S": f"reivindicacao#{key_c}"}},
        UpdateExpression="SET erpAtualizado = :f", ExpressionAttributeValues={":f": {"BOOL": False}})
    assert tools(EMITIR_REEMBOLSO, d)["resultado"] == "executado"
    assert tools(EMITIR_REEMBOLSO, c)["resultado"] == "bloqueado_por_idempotencia"
    assert _refund_row(erp) == (Decimal("60.00"), "reembolsado_parcial")
    assert mocked_aws["ledger"].get_claim(key_c).erp_updated is True
    assert len(gateway.debits()) == 2


def test_a_released_reservation_frees_the_balance(tools, gateway, erp):
    event = _event(valor=189.90)
    gateway.inject("recusar")
    assert tools(EMITIR_REEMBOLSO, event)["resultado"] == "recusado_pelo_gateway"
    # The declined refund holds nothing: another conversation may refund the whole order.
    assert tools(EMITIR_REEMBOLSO, _event(valor=189.90))["resultado"] == "executado"
    assert erp.execute("SELECT status FROM reembolsos WHERE pedido_id = '4821' ORDER BY status").fetchall() == [
        ("executado",), ("liberado",)]

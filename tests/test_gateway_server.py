"""The loopback payment gateway behaves like a real one (Stripe-style idempotency)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from emitir_reembolso.gateway import GatewayRejected, PaymentGatewayClient


@pytest.fixture
def client(local_stack):
    return PaymentGatewayClient(local_stack.gateway_url, 2)


def test_bearer_secret_is_required(client, gateway):
    with pytest.raises(GatewayRejected) as err:
        client.refund(idempotency_key="k-1", order_id="1", amount=Decimal("10.00"), token="errado")
    assert err.value.status == 401
    assert gateway.debits() == [] and gateway.stats()["nao_autorizado"] == 1


def test_same_key_same_body_replays_without_a_second_debit(client, gateway, local_stack):
    first = client.refund(idempotency_key="k-2", order_id="1", amount=Decimal("10.00"), token=local_stack.gateway_token)
    again = client.refund(idempotency_key="k-2", order_id="1", amount=Decimal("10.00"), token=local_stack.gateway_token)
    assert first.transaction_id == again.transaction_id and not first.replayed and again.replayed
    assert len(gateway.debits()) == 1 and gateway.stats()["reembolso"] == 2


def test_same_key_other_amount_is_an_error(client, gateway, local_stack):
    client.refund(idempotency_key="k-3", order_id="1", amount=Decimal("10.00"), token=local_stack.gateway_token)
    with pytest.raises(GatewayRejected) as err:
        client.refund(idempotency_key="k-3", order_id="1", amount=Decimal("11.00"), token=local_stack.gateway_token)
    assert err.value.status == 422 and err.value.code == "idempotency_key_reutilizada"
    assert len(gateway.debits()) == 1


def test_lookup_by_key(client, gateway, local_stack):
    assert client.lookup(idempotency_key="k-4", token=local_stack.gateway_token) is None
    made = client.refund(idempotency_key="k-4", order_id="7", amount=Decimal("3.50"), token=local_stack.gateway_token)
    found = client.lookup(idempotency_key="k-4", token=local_stack.gateway_token)
    assert found.transaction_id == made.transaction_id and found.amount == Decimal("3.50")


def test_injected_latency_is_applied(client, gateway, local_stack):
    import time

    gateway.inject("latencia", delay_s=0.6)
    start = time.monotonic()
    client.refund(idempotency_key="k-5", order_id="1", amount=Decimal("1.00"), token=local_stack.gateway_token)
    assert time.monotonic() - start >= 0.6


def test_unknown_fault_mode_is_refused(gateway):
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as err:
        gateway.inject("explodir")
    assert err.value.code == 400


def test_every_real_debit_is_written_to_the_debits_file(client, gateway, local_stack):
    import json

    client.refund(idempotency_key="k-6", order_id="1", amount=Decimal("2.00"), token=local_stack.gateway_token)
    lines = [json.loads(x) for x in local_stack.debits_file.read_text().splitlines() if x]
    assert [x["idempotencyKey"] for x in lines] == ["k-6"]

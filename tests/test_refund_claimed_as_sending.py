"""A fresh refund key is claimed as ``envio_possivel`` by its one conditional PutItem
(no separate send record before the POST). What that must keep: the claim still
comes before the secret is read; a process that dies anywhere after it leaves a
claim that says a request may have left, so it is re-sent (same key, same amount)
and debits once; the owner's own secret failure releases only while it still holds
the claim (the write is fenced on ``dono``)."""

from __future__ import annotations

import uuid
from decimal import Decimal

import psycopg
import pytest

from cadencia_shared import ledger as ledger_mod
from cadencia_shared.ledger import ClaimLost, ClaimStatus, refund_idempotency_key
from emitir_reembolso.gateway import PaymentGatewayClient
from emitir_reembolso.logic import RefundService, _Heard
from emitir_reembolso.models import RefundRequest
from emitir_reembolso.repository import RefundOrders
from emitir_reembolso.transitions import Event


class _Killed(BaseException):
    """The process dies here (not an ``Exception``: no handler of the refund runs)."""


def _service(local_stack, ledger, conn, read_token) -> RefundService:
    return RefundService(ledger=ledger, orders=RefundOrders(conn), read_gateway_token=read_token, claim_lease_s=30,
                         gateway=PaymentGatewayClient(local_stack.gateway_url, 3))


def _reserved(erp, key: str) -> list[tuple]:
    return erp.execute("SELECT valor FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchall()


def test_a_process_killed_before_the_secret_leaves_a_sending_claim_that_is_resent_once(
        local_stack, gateway, erp, mocked_aws):
    request = RefundRequest.model_validate({"conversaId": f"conv-{uuid.uuid4().hex[:8]}", "clienteId": 1001,
                                            "pedidoId": "4821", "valor": 50.0})
    key = refund_idempotency_key(request.conversaId, "4821")
    clock = [1_800_000_000.0]
    ledger = ledger_mod.Ledger("cadencia-agente-execucoes", mocked_aws["dynamodb"], clock=lambda: clock[0])
    read_before: list[str] = []

    def killed_at_the_secret() -> str:
        read_before.append(ledger.get_claim(key).status.value)  # what the ledger says when the secret is read
        raise _Killed

    with psycopg.connect(local_stack.postgres.user_conninfo("cadencia_agente_reembolso")) as conn, \
            pytest.raises(_Killed):
        _service(local_stack, ledger, conn, killed_at_the_secret).issue(request)
    claim = ledger.get_claim(key)
    assert read_before == ["envio_possivel"]  # claimed (as a possible send) before the secret
    assert claim.status is ClaimStatus.SENDING and claim.first_send_at == claim.created_at
    assert key in {c.key for c in ledger.unsettled_claims()} and _reserved(erp, key) != []
    assert gateway.debits() == []

    clock[0] += 31  # the dead owner's lease is over: a repeat re-sends the claim's own request
    with psycopg.connect(local_stack.postgres.user_conninfo("cadencia_agente_reembolso")) as conn:
        service = _service(local_stack, ledger, conn, lambda: local_stack.gateway_token)
        again = service.issue(request.model_copy(update={"valor": Decimal("20.00")}))
    assert again.resultado == "bloqueado_por_idempotencia"
    assert len(gateway.debits()) == 1
    assert ledger.get_claim(key).status is ClaimStatus.EXECUTED


def test_the_owners_secret_failure_releases_nothing_once_another_took_the_claim(local_stack, gateway, erp,
                                                                                 mocked_aws):
    request = RefundRequest.model_validate({"conversaId": f"conv-{uuid.uuid4().hex[:8]}", "clienteId": 1001,
                                            "pedidoId": "4821", "valor": 50.0})
    key = refund_idempotency_key(request.conversaId, "4821")
    clock = [1_800_000_000.0]
    ledger = ledger_mod.Ledger("cadencia-agente-execucoes", mocked_aws["dynamodb"], clock=lambda: clock[0])
    stale: list = []

    def slow_secret() -> str:
        stale.append(ledger.get_claim(key))
        raise _Killed  # stands for a pause long enough for the lease to end

    with psycopg.connect(local_stack.postgres.user_conninfo("cadencia_agente_reembolso")) as conn:
        with pytest.raises(_Killed):
            _service(local_stack, ledger, conn, slow_secret).issue(request)
        clock[0] += 31
        other = _service(local_stack, ledger, conn, lambda: local_stack.gateway_token)
        assert other.issue(request).resultado == "bloqueado_por_idempotencia"  # re-sent: debited once
        with pytest.raises(ClaimLost):  # the first owner wakes up and its secret read failed
            other.transition(stale[0], _Heard(Event.SECRET_FAILED, detail="segredo: Timeout"))
    assert ledger.get_claim(key).status is ClaimStatus.EXECUTED
    assert len(gateway.debits()) == 1
    row = erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone()
    assert row == (Decimal("50.00"),)

"""The in-flight over-refund (a retry while the gateway still holds the first request),
reproduced with real processes, the real gateway
server, the moto server and the real PostgreSQL: conversation A's POST times
out (or its process dies) while the gateway is still processing it, then

- A's retry asks another amount,
- A's retry (or A itself) is SIGKILLed,
- other conversations race for the same order.

Whatever happens, the gateway ends with at most the order's value debited and
ledger = gateway = ERP. Before the state machine, "not found" at the lookup freed
A's reservation and the order was refunded twice (R$ 379.80 on R$ 189.90)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from cadencia_shared.catalog import EMITIR_REEMBOLSO
from cadencia_shared.ledger import ClaimStatus, Ledger, refund_idempotency_key, table_definition
from emitir_reembolso import handler as refund_handler
from orchestrator.invokers.local import LocalContext, function_environment

from .support.seal_harness import seal_as_turn

ROOT = Path(__file__).resolve().parents[1]
ORDER, ORDER_VALUE = "4821", Decimal("189.90")
LEASE_S = 2  # short leases, so an abandoned claim is the reconciler's within the test
IN_FLIGHT_S = 4.0  # how long the gateway keeps A's request in flight (where either outcome is accepted)
HELD_S = 600.0  # held until the test releases it (gateway.release): a bound, never a window to hit
FAST = {"GATEWAY_TIMEOUT_S": "1", "REFUND_CLAIM_LEASE_S": str(LEASE_S)}


def _event(conv: str, valor: float) -> dict:
    return {"conversaId": conv, "clienteId": 1001, "pedidoId": ORDER, "valor": valor}


def _conv(label: str) -> str:
    return f"inflight-{label}-{uuid.uuid4().hex[:8]}"


def _env(local_stack, **extra: str) -> dict[str, str]:
    return {**local_stack.function_environment(EMITIR_REEMBOLSO), **FAST, **extra}


def _sealed(local_stack, event: dict, extra: dict[str, str]) -> dict:
    """Sealed as a turn seals it (docs/seal.md), on the ledger the function will read."""
    table = _env(local_stack, **extra)["LEDGER_TABLE"]
    return seal_as_turn(Ledger(table, _dynamodb(local_stack)), EMITIR_REEMBOLSO.name, event)


def refund_here(local_stack, event: dict, **extra: str) -> dict:
    event = _sealed(local_stack, event, extra)  # as the turn would
    refund_handler.reset_adapters()
    with function_environment(_env(local_stack, **extra)):
        out = refund_handler.lambda_handler(json.loads(json.dumps(event)), LocalContext("cadencia-emitir-reembolso"))
    refund_handler.reset_adapters()
    return out


def refund_process(local_stack, event: dict, **extra: str) -> subprocess.Popen:
    """Each process its own envelope, as each attempt of a turn is sealed on its own."""
    event = _sealed(local_stack, event, extra)
    env = {**os.environ, **_env(local_stack, **extra),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'functions'}"}
    return subprocess.Popen([sys.executable, "-m", "tests.support.refund_process", json.dumps(event)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def answer_of(proc: subprocess.Popen, timeout: float = 60) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, proc.returncode
    return json.loads(out.strip().splitlines()[-1])


def kill_when_posted(proc: subprocess.Popen, gateway, posts: int) -> None:
    """SIGKILL the process once the gateway has received ``posts`` refund POSTs
    in total (so it dies with its request out, not while importing)."""
    deadline = time.monotonic() + 30
    while gateway.stats()["reembolso"] < posts:
        assert proc.poll() is None and time.monotonic() < deadline, "the process never reached the gateway"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def reconcile_pass(local_stack, **extra: str):
    from conciliar_reembolsos.handler import build
    from conciliar_reembolsos.settings import ReconcilerSettings

    refund_handler.reset_adapters()
    with function_environment({**local_stack.reconciler_environment(), **FAST, **extra}):
        report = build(ReconcilerSettings.from_env()).run_pass()
    refund_handler.reset_adapters()
    return report


def _dynamodb(local_stack):
    import boto3

    env = local_stack.aws_environment()
    return boto3.client("dynamodb", region_name=env["AWS_REGION"], endpoint_url=env["AWS_ENDPOINT_URL"],
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])


def ledger(local_stack) -> Ledger:
    return Ledger(FAST["LEDGER_TABLE"], _dynamodb(local_stack))


@pytest.fixture(autouse=True)
def private_ledger(local_stack, monkeypatch):
    """A ledger table of its own for each test (same definition, on the moto server):
    a reconciliation pass here never meets another test's unsettled claims."""
    name = f"cadencia-teste-{uuid.uuid4().hex[:10]}"
    client = _dynamodb(local_stack)
    client.create_table(**table_definition(name))
    monkeypatch.setitem(FAST, "LEDGER_TABLE", name)
    yield name
    client.delete_table(TableName=name)


def wait_gateway_done(gateway, key: str, timeout: float = IN_FLIGHT_S + 6) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gateway.debits_for(key):
            return
        time.sleep(0.2)
    raise AssertionError(f"the gateway never finished {key}")


def settle_everything(local_stack, convs: list[str]) -> None:
    """Reconcile until no claim of these conversations is unsettled (leases expire)."""
    store = ledger(local_stack)
    keys = [refund_idempotency_key(c, ORDER) for c in convs]
    for _ in range(10):
        claims = [store.get_claim(k) for k in keys]
        if all(c is None or c.status in {ClaimStatus.EXECUTED, ClaimStatus.DECLINED,
                                         ClaimStatus.FAILED_BEFORE_GATEWAY} for c in claims):
            return
        time.sleep(LEASE_S + 0.2)
        reconcile_pass(local_stack)
    raise AssertionError([store.get_claim(k) for k in keys])


def assert_books_agree(local_stack, gateway, erp, convs: list[str]) -> None:
    debits = [d for d in gateway.debits() if d["pedidoId"] == ORDER]
    debited = sum((Decimal(d["valor"]) for d in debits), Decimal("0"))
    assert debited <= ORDER_VALUE, f"over-refund: {debited} debited on a {ORDER_VALUE} order"
    (erp_refunded,) = erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (ORDER,)).fetchone()
    store = ledger(local_stack)
    executed = [store.get_claim(refund_idempotency_key(c, ORDER)) for c in convs]
    in_ledger = sum((c.amount for c in executed if c and c.status is ClaimStatus.EXECUTED), Decimal("0"))
    assert debited == erp_refunded == in_ledger, (debited, erp_refunded, in_ledger)
    assert len({d["idempotencyKey"] for d in debits}) == len(debits)  # one debit per key


def test_retry_with_another_amount_never_frees_an_in_flight_request(local_stack, gateway, erp):
    a, b = _conv("a"), _conv("b")
    gateway.inject("processamento_lento", delay_s=HELD_S)
    first = refund_here(local_stack, _event(a, 189.90))
    assert first["resultado"] == "resultado_desconhecido"
    retry = refund_here(local_stack, _event(a, 200.00))  # another amount: never sent, never frees A's
    assert retry["ok"] is True and retry["resultado"] == "resultado_desconhecido", retry
    assert retry["dados"]["valor"] == "189.90"
    other = refund_here(local_stack, _event(b, 189.90))
    assert other["ok"] is False and other["erro"]["codigo"] == "valor_excede_saldo"
    gateway.release()
    wait_gateway_done(gateway, refund_idempotency_key(a, ORDER))
    again = refund_here(local_stack, _event(a, 189.90))
    assert again["resultado"] == "bloqueado_por_idempotencia" and again["dados"]["resultadoOriginal"] == "executado"
    assert_books_agree(local_stack, gateway, erp, [a, b])
    assert len(gateway.debits()) == 1


@pytest.mark.parametrize("killed", ["first_call", "retry"])
def test_a_killed_process_leaves_the_amount_held_until_the_gateway_answers(local_stack, gateway, erp, killed):
    a, b = _conv("a"), _conv("b")
    gateway.inject("processamento_lento", delay_s=HELD_S)
    if killed == "first_call":  # A dies while its POST is in flight (no timeout of its own)
        kill_when_posted(refund_process(local_stack, _event(a, 189.90), GATEWAY_TIMEOUT_S="10"), gateway, 1)
    else:  # A's POST times out; its retry (another amount) dies mid-way
        assert refund_here(local_stack, _event(a, 189.90))["resultado"] == "resultado_desconhecido"
        kill_when_posted(refund_process(local_stack, _event(a, 120.00), GATEWAY_TIMEOUT_S="10"), gateway, 3)
    claim = ledger(local_stack).get_claim(refund_idempotency_key(a, ORDER))
    assert claim.status in {ClaimStatus.SENDING, ClaimStatus.UNKNOWN, ClaimStatus.RECONCILING}, claim
    other = refund_here(local_stack, _event(b, 189.90))
    assert other["ok"] is False and other["erro"]["codigo"] == "valor_excede_saldo"
    gateway.release()  # the gateway answers A's request now
    settle_everything(local_stack, [a, b])
    assert ledger(local_stack).get_claim(refund_idempotency_key(a, ORDER)).status is ClaimStatus.EXECUTED
    assert_books_agree(local_stack, gateway, erp, [a, b])
    assert len(gateway.debits()) == 1


def test_conversations_racing_for_the_order_while_a_request_is_in_flight(local_stack, gateway, erp):
    a = _conv("a")
    gateway.inject("processamento_lento", delay_s=IN_FLIGHT_S)
    assert refund_here(local_stack, _event(a, 189.90))["resultado"] == "resultado_desconhecido"
    racers = [_conv(f"r{i}") for i in range(4)]
    procs = [refund_process(local_stack, _event(a, 50.00))]  # A's retry, another amount
    procs += [refund_process(local_stack, _event(c, v))
              for c, v in zip(racers, (189.90, 100.00, 0.01, 89.90), strict=False)]
    answers = [answer_of(p) for p in procs]
    # A's retry says what is true at that moment: still unknown, being handled, or
    # (if the gateway finished first) the original refund — never the new amount.
    assert answers[0]["resultado"] in {"resultado_desconhecido", "em_processamento", "bloqueado_por_idempotencia"}
    assert answers[0]["dados"]["valor"] == "189.90"
    assert all(x["ok"] is False and x["erro"]["codigo"] == "valor_excede_saldo" for x in answers[1:]), answers
    settle_everything(local_stack, [a, *racers])
    assert_books_agree(local_stack, gateway, erp, [a, *racers])
    assert len(gateway.debits()) == 1

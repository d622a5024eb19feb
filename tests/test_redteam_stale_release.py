"""Red-team finding: a release that lands after the key was retaken.

Real processes and the real local stack: the retry runs in its own OS process
(tests/support/refund_process), the gateway is the loopback one, the ERP the real
PostgreSQL as the refund user. The only injection is timing: the releasing side
pauses between its ledger write and its ERP write (a GC pause, a CPU-starved
container, or simply waiting for the order's row lock behind another refund)."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal


from cadencia_shared.ledger import refund_idempotency_key
from emitir_reembolso import handler as refund_handler
from emitir_reembolso.settings import RefundSettings
from orchestrator.invokers.local import function_environment
from tests.test_refund_inflight import (  # noqa: F401 (fixture)
    ORDER,
    ORDER_VALUE,
    _env,
    _event,
    answer_of,
    ledger,
    private_ledger,
    refund_here,
    refund_process,
    wait_gateway_done,
)


def _wait_posted(gateway, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while gateway.stats()["reembolso"] < 1:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_late_release_never_frees_the_reservation_of_a_retaken_key(local_stack, gateway, erp):
    """DEFECT: a releasing transition writes the ledger first (the claim becomes
    ``falhou_antes_do_gateway``, which a new request may take) and the ERP second:
    ``UPDATE reembolsos SET status = 'liberado' WHERE chave_idempotencia = K AND
    status = 'reservado'``. Nothing ties that UPDATE to the claim's generation.
    Here the reconciler releases conversation A's abandoned claim; between its
    ledger write and its ERP write, A's retry (a separate process) takes the key,
    reserves the whole order and posts. The reconciler's UPDATE then frees the
    *retry's* reservation while its request is in flight; conversation B refunds
    the same R$ 189,90 and the gateway debits R$ 379,80 on a R$ 189,90 order."""
    conv_a, conv_b = f"stale-a-{uuid.uuid4().hex[:8]}", f"stale-b-{uuid.uuid4().hex[:8]}"
    key_a = refund_idempotency_key(conv_a, ORDER)
    store = ledger(local_stack)
    # A's first invocation claimed and reserved, then died before recording a send.
    claim = store.claim_refund(key=key_a, conversation_id=conv_a, order_id=ORDER, customer_id=1001,
                               amount=ORDER_VALUE, lease_s=1)
    erp.execute("INSERT INTO reembolsos (chave_idempotencia, pedido_id, valor, status) VALUES (%s, %s, %s, 'reservado')",
                (key_a, ORDER, ORDER_VALUE))
    time.sleep(1.2)  # its lease is over: the reconciler's to release

    refund_handler.reset_adapters()
    with function_environment(_env(local_stack)):
        releaser = refund_handler.refund_service(RefundSettings.from_env())
        original_release = releaser.orders.release
        retry: list = []

        def paused_release(**kwargs):
            # Paused after the ledger says "released": A's retry arrives now.
            gateway.inject("processamento_lento", delay_s=600)  # held until released below
            retry.append(refund_process(local_stack, _event(conv_a, float(ORDER_VALUE))))
            # Paused until the retry has reserved, committed and posted -- or for 10 s,
            # if it cannot get that far while this release is pending.
            _wait_posted(gateway, 10.0)
            return original_release(**kwargs)

        releaser.orders.release = paused_release
        _, took_over = releaser.release_abandoned(claim)
    refund_handler.reset_adapters()
    assert took_over and retry
    assert _wait_posted(gateway, 30.0), "the retry never reached the gateway"

    other = refund_here(local_stack, _event(conv_b, float(ORDER_VALUE)))  # another conversation, same order
    answer_of(retry[0])
    gateway.release()  # B has tried while A's retry was in flight, however slow this machine is
    wait_gateway_done(gateway, key_a)
    debited = sum(Decimal(d["valor"]) for d in gateway.debits())
    assert debited <= ORDER_VALUE, f"gateway debited R$ {debited} on a R$ {ORDER_VALUE} order; B got {other}"

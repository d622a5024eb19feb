"""A release that dies between the ledger and the ERP commit (the ledger says
released, the ERP row still says ``reservado``) is finished, never left held.

Real processes and the real local stack: the releasing refund runs in its own OS
process and SIGKILLs itself right after the ledger recorded the release, before
the ERP transaction commits (tests/support/refund_process, ``after_release_ledger``);
or its COMMIT really fails (its PostgreSQL backend is terminated by the admin
between the release UPDATE and the COMMIT). Causes: a gateway decline, and a
refused connection (failed before the gateway)."""

from __future__ import annotations

import signal
import uuid
from decimal import Decimal

import pytest

from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from emitir_reembolso.repository import RefundOrders
from tests.test_refund_inflight import (  # noqa: F401 (fixture)
    ORDER,
    ORDER_VALUE,
    _event,
    ledger,
    private_ledger,
    reconcile_pass,
    refund_here,
    refund_process,
)

REFUSED = "http://127.0.0.1:9"  # nothing listens: connection refused
RELEASED = {"recusa": ClaimStatus.DECLINED, "conexao_recusada": ClaimStatus.FAILED_BEFORE_GATEWAY}


def _conv(label: str) -> str:
    return f"release-{label}-{uuid.uuid4().hex[:8]}"


def _cause(gateway, cause: str) -> dict[str, str]:
    if cause == "recusa":
        gateway.inject("recusar")
        return {}
    return {"GATEWAY_URL": REFUSED}


def _row(erp, key: str) -> str | None:
    row = erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()
    return row[0] if row else None


def _listed(local_stack, key: str) -> bool:
    return key in {c.key for c in ledger(local_stack).unsettled_claims(limit=1000)}


def _die_after_release_ledger(local_stack, gateway, erp, cause: str) -> str:
    conv = _conv("a")
    key = refund_idempotency_key(conv, ORDER)
    proc = refund_process(local_stack, _event(conv, float(ORDER_VALUE)),
                          REFUND_PROCESS_DIE_AT="after_release_ledger", **_cause(gateway, cause))
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    # The crash point really was hit: the ledger says released, the ERP did not commit.
    assert ledger(local_stack).get_claim(key).status is RELEASED[cause]
    assert _row(erp, key) == "reservado"
    return key


def _assert_finished_by_the_reconciler(local_stack, gateway, erp, key: str) -> None:
    # The work list still holds it: the ERP does not agree yet.
    assert _listed(local_stack, key), "a released claim left the work list before its ERP release committed"
    reconcile_pass(local_stack)
    assert _row(erp, key) == "liberado"
    assert not _listed(local_stack, key)
    assert ledger(local_stack).get_claim(key).erp_updated is True
    # Nothing is held any more: another conversation refunds the whole order.
    other = refund_here(local_stack, _event(_conv("b"), float(ORDER_VALUE)))
    assert other["ok"] is True and other["resultado"] == "executado", other
    assert [Decimal(d["valor"]) for d in gateway.debits()] == [ORDER_VALUE]


@pytest.mark.parametrize("cause", sorted(RELEASED))
def test_a_sigkill_between_the_ledger_release_and_the_erp_commit_is_finished(local_stack, gateway, erp, cause):
    key = _die_after_release_ledger(local_stack, gateway, erp, cause)
    _assert_finished_by_the_reconciler(local_stack, gateway, erp, key)


@pytest.mark.parametrize("cause", sorted(RELEASED))
def test_a_failed_erp_commit_after_the_ledger_release_is_finished(local_stack, gateway, erp, cause, monkeypatch):
    conv = _conv("a")
    key = refund_idempotency_key(conv, ORDER)
    release = RefundOrders.release

    def release_then_lose_the_connection(self: RefundOrders, **kwargs):
        release(self, **kwargs)
        # The backend goes away before the COMMIT: the COMMIT fails for real.
        erp.execute("SELECT pg_terminate_backend(%s)", (self.conn.info.backend_pid,))

    monkeypatch.setattr(RefundOrders, "release", release_then_lose_the_connection)
    try:
        answer = refund_here(local_stack, _event(conv, float(ORDER_VALUE)), **_cause(gateway, cause))
    except Exception:  # noqa: BLE001 - a lost connection may surface as the handler's crash
        answer = None
    monkeypatch.setattr(RefundOrders, "release", release)
    assert answer is None or answer.get("resultado") != "executado"
    assert ledger(local_stack).get_claim(key).status is RELEASED[cause]
    assert _row(erp, key) == "reservado"
    _assert_finished_by_the_reconciler(local_stack, gateway, erp, key)


def test_another_conversation_is_not_refused_by_a_reservation_the_ledger_released(local_stack, gateway, erp):
    """Before any reconciler pass: the order's row lock proves the released claim
    can no longer change, so the refund frees the stale reservation and answers the truth."""
    key = _die_after_release_ledger(local_stack, gateway, erp, "recusa")
    other = refund_here(local_stack, _event(_conv("b"), float(ORDER_VALUE)))
    assert other["ok"] is True and other["resultado"] == "executado", other
    assert _row(erp, key) == "liberado" and not _listed(local_stack, key)
    assert [Decimal(d["valor"]) for d in gateway.debits()] == [ORDER_VALUE]

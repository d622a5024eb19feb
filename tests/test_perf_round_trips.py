"""The tools' performance goals (docs/performance.md), counted on the wire: the status query is one SQL
round trip on a read-only session; a repeat of a settled refund is answered from
its claim alone (one strongly consistent GetItem, no SQL, no secret, no gateway);
and that shortcut never answers what only the order's lock may decide — also
when the first call and its repeats race from separate OS processes."""

from __future__ import annotations

import os
import signal
import time
import uuid
from decimal import Decimal

import psycopg
import pytest

from cadencia_shared import db
from cadencia_shared.catalog import CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO
from cadencia_shared.ledger import ClaimStatus, Ledger, refund_idempotency_key
from scripts.perf.sql_trace import traced
from tests.test_emitir_reembolso import CallLog, call_log  # noqa: F401 - the fixture
from tests.test_refund_inflight import FAST, answer_of, refund_process

REFUND_USER = EMITIR_REEMBOLSO.db_user


def _event(conv: str | None = None, **overrides):
    event = {"conversaId": conv or f"rt-{uuid.uuid4().hex[:8]}", "clienteId": 1001, "pedidoId": "4821",
             "valor": 50.0}
    return {**event, **overrides}


def _connections_of(user: str) -> list[psycopg.Connection]:
    return [c for c in db.open_connections() if c.info.user == user]


def test_the_status_query_is_one_round_trip_on_a_read_only_session(tools):
    event = {"conversaId": "rt-status", "clienteId": 1001, "pedidoId": "4821"}
    assert tools(CONSULTAR_STATUS_PEDIDO, event)["ok"]  # the connection is open now (warm)
    (conn,) = _connections_of(CONSULTAR_STATUS_PEDIDO.db_user)
    with traced([conn]) as sql:
        out = tools(CONSULTAR_STATUS_PEDIDO, event)
    assert out["ok"] and out["dados"]["pedidoId"] == "4821"
    assert (sql.statements, sql.round_trips) == (1, 1), sql.texts
    assert not any(t.upper().startswith(("BEGIN", "COMMIT")) for t in sql.texts)
    # Read-only whatever the GRANTs: the server refuses a write in this session.
    assert conn.execute("SHOW transaction_read_only").fetchone() == ("on",)
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("CREATE TEMP TABLE probe (x int)")
    # A foreign order is still the same empty answer (ownership in the WHERE clause).
    other = tools(CONSULTAR_STATUS_PEDIDO, {**event, "clienteId": 1002})
    assert not other["ok"] and other["erro"]["codigo"] == "pedido_nao_encontrado"


@pytest.mark.parametrize("fault", [None, "recusar"])
def test_a_repeat_of_a_settled_refund_is_answered_from_its_claim_alone(tools, gateway, erp, call_log, fault):
    if fault:
        gateway.inject(fault)
    event = _event()
    first = tools(EMITIR_REEMBOLSO, event)
    assert first["resultado"] == ("recusado_pelo_gateway" if fault else "executado")
    calls_before, stats_before = len(call_log.calls), gateway.stats()
    with traced(_connections_of(REFUND_USER)) as sql:
        again = tools(EMITIR_REEMBOLSO, event)
    assert again["resultado"] == "bloqueado_por_idempotencia"
    assert again["dados"]["resultadoOriginal"] == first["resultado"]
    assert call_log.calls[calls_before:] == ["GetItem"]
    assert sql.statements == 0 and sql.round_trips == 0, sql.texts
    assert gateway.stats() == stats_before
    assert len(gateway.debits()) == (0 if fault else 1)


def test_an_executed_claim_whose_erp_update_was_lost_takes_the_locked_path_and_is_repaired(tools, gateway, erp,
                                                                                           mocked_aws):
    event = _event()
    assert tools(EMITIR_REEMBOLSO, event)["resultado"] == "executado"
    ledger: Ledger = mocked_aws["ledger"]
    key = refund_idempotency_key(event["conversaId"], "4821")
    # Simulate the crash between the ERP commit and its flag: the ERP loses the refund
    # too (as if its transaction never committed), and the flag is cleared.
    mocked_aws["dynamodb"].update_item(TableName=ledger.table_name, Key={"pk": {"S": f"reivindicacao#{key}"}},
                                       UpdateExpression="REMOVE erpAtualizado")
    erp.execute("DELETE FROM reembolsos WHERE chave_idempotencia = %s", (key,))
    erp.execute("UPDATE pedidos SET valor_reembolsado = 0, status_reembolso = 'nenhum' WHERE id = '4821'")
    with traced(_connections_of(REFUND_USER)) as sql:
        again = tools(EMITIR_REEMBOLSO, event)
    assert again["resultado"] == "bloqueado_por_idempotencia"
    assert sql.statements > 0  # the lock, the repair
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("50.00"),)
    assert ledger.get_claim(key).erp_updated
    assert len(gateway.debits()) == 1


def test_a_claim_never_answers_another_customer(tools, gateway, erp, mocked_aws):
    """The claim says who asked; ownership is still the order's: a foreign customer
    reusing the conversation and order gets the unknown-order error, not the claim."""
    event = _event()
    assert tools(EMITIR_REEMBOLSO, event)["resultado"] == "executado"
    foreign = tools(EMITIR_REEMBOLSO, {**event, "clienteId": 1002})
    assert not foreign["ok"] and foreign["erro"]["codigo"] == "pedido_nao_encontrado"
    assert "4821" in foreign["erro"]["mensagem"] and "emitido" not in str(foreign)


def test_an_unknown_outcome_or_an_expired_lease_is_never_answered_from_the_claim(mocked_aws):
    from emitir_reembolso.logic import answer_from_claim

    ledger: Ledger = mocked_aws["ledger"]
    key = refund_idempotency_key(f"rt-{uuid.uuid4().hex[:8]}", "4821")
    claim = ledger.claim_refund(key=key, conversation_id="c", order_id="4821", customer_id=1001,
                                amount=Decimal("10"), lease_s=30)
    now = ledger.now_ms()
    assert answer_from_claim(claim, 1001, now).resultado == "em_processamento"
    assert answer_from_claim(claim, 1001, claim.lease_until_ms) is None  # lease over: the locked path decides
    assert answer_from_claim(claim, 1002, now) is None
    sending = ledger.settle_claim(claim, ClaimStatus.SENDING)
    assert answer_from_claim(sending, 1001, now).resultado == "em_processamento"
    unknown = ledger.settle_claim(sending, ClaimStatus.UNKNOWN)
    assert answer_from_claim(unknown, 1001, now) is None  # reconcile, under the lock
    executed = ledger.settle_claim(unknown, ClaimStatus.EXECUTED)
    assert answer_from_claim(executed, 1001, now) is None  # ERP not updated yet: repair first
    assert answer_from_claim(ledger.mark_erp_updated(executed), 1001, now).resultado == "bloqueado_por_idempotencia"
    assert answer_from_claim(None, 1001, now) is None


def test_a_first_call_and_its_repeats_racing_from_separate_processes_debit_once(local_stack, gateway, erp):
    """The first call is held in flight at the gateway while four repeats start in
    their own processes: they see the claim under a live lease (em_processamento) or
    settled (bloqueado_por_idempotencia) — never a second debit, never a false
    "already issued" before the debit exists."""
    gateway.inject("latencia", delay_s=2.0)
    event = _event(valor=40.0)
    first = refund_process(local_stack, event, GATEWAY_TIMEOUT_S="10")
    deadline = time.monotonic() + 30
    while gateway.stats()["reembolso"] < 1:
        assert first.poll() is None and time.monotonic() < deadline, "the first call never reached the gateway"
        time.sleep(0.02)
    repeats = [refund_process(local_stack, event, GATEWAY_TIMEOUT_S="10") for _ in range(4)]
    answers = [answer_of(p) for p in repeats]
    assert answer_of(first)["resultado"] == "executado"
    debited_when = {a["resultado"] for a in answers}
    assert debited_when <= {"em_processamento", "bloqueado_por_idempotencia"}, answers
    for a in answers:
        if a["resultado"] == "bloqueado_por_idempotencia":
            assert a["dados"]["resultadoOriginal"] == "executado"
    assert len(gateway.debits()) == 1
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("40.00"),)


def test_a_repeat_after_the_first_call_was_sigkilled_mid_send_is_reconciled_not_answered(local_stack, gateway, erp):
    """SIGKILL the first call while its POST is held by the gateway: its claim says a
    send may have happened. A repeat under the live lease says em_processamento (from
    the claim); after the lease, the claim is not answerable from the claim alone and
    the repeat reconciles by re-sending the same request: one debit in all."""
    gateway.inject("processamento_lento", delay_s=600)  # held until released below
    event = _event(valor=30.0)
    first = refund_process(local_stack, event, **FAST)
    deadline = time.monotonic() + 30
    while gateway.stats()["reembolso"] < 1:
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    during = answer_of(refund_process(local_stack, event, **FAST))
    assert during["resultado"] in {"em_processamento", "resultado_desconhecido"}  # still held: nothing settled
    gateway.release()  # the killed call's request is decided at the gateway
    assert gateway.wait_for_debit(refund_idempotency_key(event["conversaId"], event["pedidoId"]))
    time.sleep(int(FAST["REFUND_CLAIM_LEASE_S"]) + 0.5)  # the dead owner's lease is over (a sleep only outlasts it)
    after = answer_of(refund_process(local_stack, event, **FAST))
    assert after["resultado"] == "bloqueado_por_idempotencia" and after["dados"]["resultadoOriginal"] == "executado"
    assert len(gateway.debits()) == 1
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("30.00"),)


def test_a_successful_call_on_a_healthy_circuit_writes_nothing_and_a_success_still_resets_failures(mocked_aws):
    """The breaker's success step used to be a conditional UpdateItem on every call;
    on a closed circuit with no failures its condition fails, which still costs a
    write unit. Now it writes only when the read before the call saw failures."""
    from cadencia_shared.catalog import TOOLS
    from orchestrator.breaker import CircuitBreaker
    from orchestrator.circuit_store import CircuitStore
    from orchestrator.controls import CallContext, CallOutcome
    from orchestrator.invokers import Invocation, InvocationStatus
    from orchestrator.model import Deadline
    from orchestrator.tools import ToolCall

    ledger: Ledger = mocked_aws["ledger"]
    writes: list[str] = []
    ledger.client.meta.events.register("before-call.dynamodb.*",
                                       lambda model, **_: writes.append(model.name)
                                       if model.name != "GetItem" else None)
    breaker, store = CircuitBreaker(ledger, failures=5, cooldown_s=30), CircuitStore(ledger)
    spec = TOOLS["consultar_status_pedido"]
    answered = CallOutcome(invocation=Invocation(InvocationStatus.OK, payload={"ok": True}))

    def one_successful_call() -> None:
        ctx = CallContext(ToolCall(spec, f"toolu_{uuid.uuid4().hex[:6]}", {"pedidoId": "4821"}, "c", 1001),
                          Deadline(lambda: 60_000))
        assert breaker.before(ctx) is None
        breaker.after(ctx, answered)

    one_successful_call()
    assert writes == []
    store.add_failure(spec.name)
    store.add_failure(spec.name)
    writes.clear()
    one_successful_call()
    assert writes == ["UpdateItem"] and store.read(spec.name).failures == 0


def test_a_first_refund_settles_its_claim_with_the_erp_already_updated_in_one_write(tools, gateway, erp, call_log,
                                                                                     mocked_aws):
    """The ERP's refund commits before the claim's last write, which then says both
    "executed" and "the ERP agrees" (and leaves the reconciler's list): one UpdateItem
    fewer than settling, then flagging. A crash between the two leaves the claim
    SENDING, which a repeat or the reconciler settles by re-sending the same request
    (test_a_crash_after_the_erp_update_before_the_claim_settles_is_reconciled_once)."""
    event = _event()
    assert tools(EMITIR_REEMBOLSO, event)["resultado"] == "executado"
    assert call_log.count("UpdateItem") == 2, call_log.calls  # SENDING, then EXECUTED + erpAtualizado
    ledger: Ledger = mocked_aws["ledger"]
    claim = ledger.get_claim(refund_idempotency_key(event["conversaId"], "4821"))
    assert claim.status is ClaimStatus.EXECUTED and claim.erp_updated
    assert claim.key not in {c.key for c in ledger.unsettled_claims()}
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("50.00"),)


def test_a_crash_after_the_erp_update_before_the_claim_settles_is_reconciled_once(tools, gateway, erp, mocked_aws,
                                                                                  monkeypatch):
    """The process dies after the ERP's COMMIT and before the claim's final write: the
    claim still says SENDING (a request may have left). After its lease, a repeat takes
    it over, re-sends the same request (the gateway replays its approval) and the ERP's
    once-per-key update adds nothing: one debit, the order refunded once."""
    class Died(BaseException):
        pass

    event = _event(valor=45.0)
    ledger: Ledger = mocked_aws["ledger"]
    real_settle = Ledger.settle_claim

    def dies_on_executed(self, claim, status, **kwargs):
        if status is ClaimStatus.EXECUTED:
            raise Died()
        return real_settle(self, claim, status, **kwargs)

    monkeypatch.setattr(Ledger, "settle_claim", dies_on_executed)
    with pytest.raises(Died):
        tools(EMITIR_REEMBOLSO, event)
    monkeypatch.setattr(Ledger, "settle_claim", real_settle)
    key = refund_idempotency_key(event["conversaId"], "4821")
    left = ledger.get_claim(key)
    assert left.status is ClaimStatus.SENDING and left.key in {c.key for c in ledger.unsettled_claims()}
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("45.00"),)
    # The dead owner's lease is over: the tool's own ledger reads an injected clock.
    from emitir_reembolso import handler as refund_handler
    from emitir_reembolso.settings import RefundSettings
    from orchestrator.invokers.local import function_environment

    with function_environment(tools.environment(EMITIR_REEMBOLSO)):
        wired = refund_handler.adapters(RefundSettings.from_env())
    monkeypatch.setattr(wired.ledger.table, "clock", lambda: (left.lease_until_ms + 1000) / 1000)
    again = tools(EMITIR_REEMBOLSO, event)
    assert again["resultado"] == "bloqueado_por_idempotencia", again
    assert again["dados"]["resultadoOriginal"] == "executado"
    assert len(gateway.debits()) == 1
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("45.00"),)
    settled = ledger.get_claim(key)
    assert settled.status is ClaimStatus.EXECUTED and settled.erp_updated


def test_a_process_sigkilled_between_the_erp_commit_and_the_claim_write_debits_and_refunds_once(local_stack, gateway,
                                                                                                 erp):
    """The same crash point as a real OS process killed there; the repeat and the
    scheduled reconciler race to settle it after the lease: one debit, one ERP refund."""
    from tests.test_refund_inflight import _dynamodb, reconcile_pass

    event = _event(valor=35.0)
    dead = refund_process(local_stack, event, REFUND_PROCESS_DIE_AT="before_executed_ledger", **FAST)
    dead.wait(timeout=60)
    assert dead.returncode == -signal.SIGKILL
    key = refund_idempotency_key(event["conversaId"], "4821")
    ledger = Ledger(local_stack.function_environment(EMITIR_REEMBOLSO)["LEDGER_TABLE"], _dynamodb(local_stack))
    assert ledger.get_claim(key).status is ClaimStatus.SENDING
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("35.00"),)
    time.sleep(int(FAST["REFUND_CLAIM_LEASE_S"]) + 0.5)  # the dead owner's lease is over (a sleep only outlasts it)
    repeat = refund_process(local_stack, event, **FAST)
    reconcile_pass(local_stack)
    after = answer_of(repeat)
    assert after["resultado"] in {"bloqueado_por_idempotencia", "em_processamento"}, after
    claim = ledger.get_claim(key)
    assert claim.status is ClaimStatus.EXECUTED and claim.erp_updated
    assert len(gateway.debits()) == 1
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = '4821'").fetchone() == (Decimal("35.00"),)
    assert erp.execute("SELECT count(*) FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone() == (1,)

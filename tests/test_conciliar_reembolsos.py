"""The scheduled reconciler against the moto server, the real PostgreSQL (as its
own DB user) and the real gateway: one pass settles what the gateway has decided,
leaves what is still in flight held, releases only what never left, and says so
with one metric per outcome; the event edge is strict; the local one-pass command
prints its progress."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from conciliar_reembolsos import handler as reconciler_handler
from emitir_reembolso import handler as refund_handler
from conciliar_reembolsos.logic import Verdict
from emitir_reembolso.gateway import PaymentGatewayClient
from orchestrator.invokers.local import LocalContext, function_environment
from scripts.local_stack.emf import capture_emf
from tests.test_refund_inflight import FAST, ORDER, ledger, private_ledger, reconcile_pass  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]


def _claim(local_stack, *, status: ClaimStatus, valor: str = "50.00", lease_s: int = 1, clock=None):
    store = ledger(local_stack)
    if clock is not None:
        store.table.clock = clock
    conv = f"rec-{uuid.uuid4().hex[:8]}"
    key = refund_idempotency_key(conv, ORDER)
    claim = store.claim_refund(key=key, conversation_id=conv, order_id=ORDER, customer_id=1001,
                               amount=Decimal(valor), lease_s=lease_s)
    if status is not ClaimStatus.IN_PROGRESS:
        store.settle_claim(claim, status)
    return key


def _reserve(erp, key: str, valor: str = "50.00") -> None:
    erp.execute("INSERT INTO reembolsos (chave_idempotencia, pedido_id, valor, status) VALUES (%s, %s, %s, 'reservado')",
                (key, ORDER, Decimal(valor)))


def _reservation(erp, key: str) -> str | None:
    row = erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()
    return row[0] if row else None


def _visit(report, key):
    return next(v for v in report.visits if v.key == key)


def test_one_pass_settles_each_kind_of_unsettled_claim(local_stack, gateway, erp):
    post = PaymentGatewayClient(local_stack.gateway_url, 2)
    debited = _claim(local_stack, status=ClaimStatus.UNKNOWN)  # its POST did debit
    post.refund(idempotency_key=debited, order_id=ORDER, amount=Decimal("50.00"), token=local_stack.gateway_token)
    never_arrived = _claim(local_stack, status=ClaimStatus.SENDING)  # died after recording, before the POST
    abandoned = _claim(local_stack, status=ClaimStatus.IN_PROGRESS)  # died before recording a send
    live = _claim(local_stack, status=ClaimStatus.SENDING, lease_s=300)  # its owner is still working
    for key in (debited, never_arrived, abandoned, live):
        _reserve(erp, key)
    time.sleep(1.1)  # the short leases are over
    with capture_emf() as emf:
        report = reconcile_pass(local_stack)
    assert _visit(report, debited).verdict is Verdict.EXECUTED
    assert _visit(report, never_arrived).verdict is Verdict.EXECUTED  # re-sent: performed once
    assert _visit(report, abandoned).verdict is Verdict.RELEASED
    assert _visit(report, live).verdict is Verdict.BUSY
    assert [_reservation(erp, k) for k in (debited, never_arrived, abandoned, live)] == [
        "executado", "executado", "liberado", "reservado"]
    keys = {d["idempotencyKey"] for d in gateway.debits()}
    assert keys == {debited, never_arrived} and len(gateway.debits()) == 2
    store = ledger(local_stack)
    assert store.get_claim(abandoned).status is ClaimStatus.FAILED_BEFORE_GATEWAY
    pending = {c.key for c in store.unsettled_claims(limit=1000)}
    assert live in pending and not pending & {debited, never_arrived, abandoned}
    outcomes = {dims: n for (name, dims), n in emf.totals().items() if name == "ConciliacoesDeReembolso"}
    assert outcomes[(("Resultado", "executado"),)] >= 2 and outcomes[(("Resultado", "liberado"),)] >= 1
    assert any(name == "IdadeDoReembolsoPendenteMaisAntigo" for name, _ in emf.totals())


def test_in_flight_stays_unknown_and_held_and_a_refused_connection_frees_nothing(local_stack, gateway, erp):
    key = _claim(local_stack, status=ClaimStatus.UNKNOWN, valor="30.00")
    _reserve(erp, key, "30.00")
    # The original request is still being processed at the gateway — held there until the
    # test releases it, however long the passes below take: 409 to the re-send.
    slow = PaymentGatewayClient(local_stack.gateway_url, 0.5)
    gateway.inject("processamento_lento", delay_s=600)
    with pytest.raises(Exception):
        slow.refund(idempotency_key=key, order_id=ORDER, amount=Decimal("30.00"), token=local_stack.gateway_token)
    assert _visit(reconcile_pass(local_stack), key).verdict is Verdict.UNKNOWN
    assert _reservation(erp, key) == "reservado"
    # The gateway now unreachable: a refused re-send proves nothing about the first request.
    refund_env = {**local_stack.reconciler_environment(), **FAST, "GATEWAY_URL": "http://127.0.0.1:9"}
    with function_environment(refund_env):
        from conciliar_reembolsos.settings import ReconcilerSettings

        refund_handler.reset_adapters()
        report = reconciler_handler.build(ReconcilerSettings.from_env()).run_pass()
        refund_handler.reset_adapters()
    assert _visit(report, key).verdict is Verdict.UNKNOWN
    assert _reservation(erp, key) == "reservado" and ledger(local_stack).get_claim(key).status is ClaimStatus.UNKNOWN
    gateway.release()  # the original request is decided at the gateway
    assert gateway.wait_for_debit(key)
    assert _visit(reconcile_pass(local_stack), key).verdict is Verdict.EXECUTED
    assert [d["valor"] for d in gateway.debits()] == ["30.00"]


@pytest.mark.parametrize("event", [
    None, "Scheduled Event", [], {}, {"source": "aws.events"},
    {"source": "evil", "detail-type": "Scheduled Event"},
    {"source": "aws.events", "detail-type": "Scheduled Event\n"},
    {"source": ["aws.events"], "detail-type": "Scheduled Event"},
])
def test_anything_but_a_scheduled_event_is_a_typed_error_and_touches_nothing(local_stack, gateway, event):
    out = reconciler_handler.lambda_handler(event, LocalContext("cadencia-conciliar-reembolsos"))
    assert out["ok"] is False and out["erro"]["codigo"] == "entrada_invalida"
    assert gateway.stats()["reembolso"] == 0 and gateway.stats()["consulta"] == 0


def test_local_command_runs_one_pass_with_progress(local_stack, gateway, erp):
    key = _claim(local_stack, status=ClaimStatus.UNKNOWN, valor="10.00")
    _reserve(erp, key, "10.00")
    env = {**os.environ, "CADENCIA_LOCAL_STACK_DIR": local_stack.directory, "LEDGER_TABLE": FAST["LEDGER_TABLE"]}
    out = subprocess.run(["bash", "scripts/local-stack", "reconcile"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "pendente" in out.stdout and "desconhecido -> executado" in out.stdout
    assert "reconciliation pass" in out.stdout
    assert [d["idempotencyKey"] for d in gateway.debits()] == [key]


def test_a_scheduled_event_runs_one_pass_through_the_handler(local_stack, gateway, erp):
    key = _claim(local_stack, status=ClaimStatus.UNKNOWN, valor="12.00")
    _reserve(erp, key, "12.00")
    refund_handler.reset_adapters()
    with function_environment({**local_stack.reconciler_environment(), **FAST}):
        out = reconciler_handler.lambda_handler(reconciler_handler.scheduled_event(),
                                                LocalContext("cadencia-conciliar-reembolsos"))
    refund_handler.reset_adapters()
    assert out["ok"] is True and out["resultado"]["executado"] >= 1
    assert _reservation(erp, key) == "executado"


def test_an_executed_claim_whose_erp_update_was_lost_is_finished_once(local_stack, gateway, erp):
    """A crash after the ledger said 'executado' and before the ERP commit: the claim
    stays in the index until the ERP has it; the pass adds it once, a second pass
    finds nothing to do."""
    store = ledger(local_stack)
    key = _claim(local_stack, status=ClaimStatus.SENDING, valor="20.00")
    _reserve(erp, key, "20.00")
    claim = store.get_claim(key)
    store.settle_claim(claim, ClaimStatus.EXECUTED, gateway_transaction="rb_perdido")  # ... and the process died
    assert key in {c.key for c in store.unsettled_claims(limit=1000)}
    assert _visit(reconcile_pass(local_stack), key).verdict is Verdict.EXECUTED
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (ORDER,)).fetchone() == (
        Decimal("20.00"),)
    assert key not in {c.key for c in store.unsettled_claims(limit=1000)}
    assert store.get_claim(key).erp_updated is True
    reconcile_pass(local_stack)
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (ORDER,)).fetchone() == (
        Decimal("20.00"),)
    assert gateway.stats()["reembolso"] == 0  # nothing was asked of the gateway


def _reconciler_process(local_stack) -> subprocess.Popen:
    env = {**os.environ, "CADENCIA_LOCAL_STACK_DIR": local_stack.directory, **FAST}
    return subprocess.Popen(["bash", "scripts/local-stack", "reconcile"], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_reconcilers_racing_in_separate_processes_send_each_claim_once(local_stack, gateway, erp):
    """Three passes at once (more than the one the schedule runs) over claims whose
    first POST never arrived: the fenced take-over lets one re-send each; one debit per key."""
    keys = [_claim(local_stack, status=ClaimStatus.UNKNOWN, valor="5.00") for _ in range(5)]
    for key in keys:
        _reserve(erp, key, "5.00")
    procs = [_reconciler_process(local_stack) for _ in range(3)]
    for proc in procs:
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out
    debits = [d["idempotencyKey"] for d in gateway.debits()]
    assert sorted(debits) == sorted(keys)
    assert [_reservation(erp, k) for k in keys] == ["executado"] * 5
    assert erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (ORDER,)).fetchone() == (
        Decimal("25.00"),)


def test_a_reconciler_killed_mid_send_leaves_the_claim_held_and_the_next_pass_settles_it(local_stack, gateway, erp):
    import signal

    key = _claim(local_stack, status=ClaimStatus.UNKNOWN, valor="7.00")
    _reserve(erp, key, "7.00")
    gateway.inject("processamento_lento", delay_s=600)  # held until the test releases it
    proc = _reconciler_process(local_stack)
    deadline = time.monotonic() + 60
    while gateway.stats()["reembolso"] < 1:  # its re-send is at the gateway
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    # Killed (the bash wrapper execs python, so the pid is the reconciler itself).
    assert proc.returncode == -signal.SIGKILL
    assert ledger(local_stack).get_claim(key).status is ClaimStatus.RECONCILING
    assert _reservation(erp, key) == "reservado"
    gateway.release()
    assert gateway.wait_for_debit(key)  # the killed owner's re-send, decided at the gateway
    time.sleep(2.5)  # the killed owner's lease (2 s) is over (a sleep can only outlast it)
    assert _visit(reconcile_pass(local_stack), key).verdict is Verdict.EXECUTED
    assert [d["valor"] for d in gateway.debits()] == ["7.00"]
    assert _reservation(erp, key) == "executado"


def _random_json(rng, depth=0):
    kinds = ["none", "bool", "int", "float", "str"] + (["list", "dict"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "none":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.randint(-10**12, 10**12)
    if kind == "float":
        return rng.uniform(-1e6, 1e6)
    if kind == "str":
        return rng.choice(["aws.events", "Scheduled Event", "", " aws.events", "aws.events\n", "AWS.EVENTS",
                           "Scheduled Event\u202e", "scheduled event", "\u0000", "x" * 300])
    if kind == "list":
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["source", "detail-type", "detail_type", "detail", "time", "version"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_hostile_events_never_start_a_pass(local_stack, gateway):
    """600 random JSON values (seeded), near misses of the scheduled event among them:
    every one that is not exactly a scheduled event gets the typed error and starts
    nothing (no settings read, no ledger, no gateway)."""
    import random

    rng = random.Random(87)
    valid = 0
    for _ in range(600):
        event = _random_json(rng)
        if rng.random() < 0.5:  # a scheduled event with one field disturbed
            event = {**reconciler_handler.scheduled_event(), rng.choice(["source", "detail-type"]): event}
        exact = (isinstance(event, dict) and event.get("source") == "aws.events"
                 and event.get("detail-type") == "Scheduled Event")
        if exact:
            valid += 1
            continue
        out = reconciler_handler.lambda_handler(event, LocalContext("cadencia-conciliar-reembolsos"))
        assert out == {"ok": False, "erro": {"codigo": "entrada_invalida", "mensagem": out["erro"]["mensagem"]}}
    assert gateway.stats() == {"reembolso": 0, "consulta": 0, "nao_autorizado": 0, "debitos": 0}
    assert valid < 600

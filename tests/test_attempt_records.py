"""The attempt records on the counter item, attacked: real SIGKILLs of real processes
on the local stack's moto server, and hypothesis over the ids and detail strings.

What ``registros[n-1]`` = attempt n rests on: the number and the record come from ONE
UpdateItem, so no process death can separate them; the list grows only while it is
dense, so a result is never written to another attempt's record.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import uuid
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from cadencia_shared.ledger import AttemptResult, Ledger, table_definition
from cadencia_shared.ledger.attempts import REFUSALS_LISTED, RESULT_DETAIL_MAX
from cadencia_shared.ledger.table import counter_pk
from tests.support.call_links import answer

REFUND = "emitir_reembolso"


def _ledger(endpoint: str, table: str) -> Ledger:
    from scripts.local_stack.aws import session_client

    return Ledger(table, session_client("dynamodb", endpoint))


def _fresh_table(endpoint: str) -> str:
    from scripts.local_stack.aws import session_client

    table = f"cadencia-tentativas-{uuid.uuid4().hex[:10]}"
    session_client("dynamodb", endpoint).create_table(**table_definition(table))
    return table


def _decide_then_hang(endpoint: str, table: str, conv: str, ready: Any) -> None:
    """The real ceiling control lets a refund call through; the process is then
    "invoking" the tool when it is SIGKILLed."""
    from cadencia_shared.catalog import TOOLS
    from orchestrator.controls import CallContext, RetryCeiling
    from orchestrator.model import Deadline
    from orchestrator.tools import ToolCall

    call = ToolCall(spec=TOOLS[REFUND], tool_use_id="toolu_sigkill", arguments={"pedidoId": "4821", "valor": 1},
                    conversation_id=conv, customer_id=1001)
    assert RetryCeiling(_ledger(endpoint, table), 4).before(CallContext(call, Deadline.after(60))) is None
    ready.set()
    time.sleep(600)


def _spawn(target: Any, *args: Any) -> mp.process.BaseProcess:
    process = mp.get_context("spawn").Process(target=target, args=args)
    process.start()
    return process


def _kill(process: mp.process.BaseProcess) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=30)
    assert process.exitcode == -signal.SIGKILL


def test_an_orchestrator_killed_after_the_decision_leaves_the_attempt_pending(local_stack):
    """SIGKILL between the counter write and the tool's answer: the attempt is on the
    counter item, ``pendente``, with its order and key (the write-ahead evidence the
    audit chain's missing link points to), and the next attempt is numbered after it."""
    table, conv = _fresh_table(local_stack.aws_endpoint), f"conv-kill-{uuid.uuid4().hex[:6]}"
    ready = mp.get_context("spawn").Event()
    process = _spawn(_decide_then_hang, local_stack.aws_endpoint, table, conv, ready)
    try:
        assert ready.wait(120)
    finally:
        _kill(process)
    ledger = _ledger(local_stack.aws_endpoint, table)
    (record,) = ledger.attempts(conv)
    assert {k: record[k] for k in ("tentativaNumero", "decisao", "resultado", "pedidoId", "chaveIdempotencia")} == {
        "tentativaNumero": 1, "decisao": "permitida", "resultado": "pendente", "pedidoId": "4821",
        "chaveIdempotencia": f"{conv}#4821#reembolso"}
    second = ledger.register_attempt(conversation_id=conv, subject="4821", tool=REFUND, ceiling=4, order_id="4821")
    assert second.number == 2 and second.allowed
    answer(ledger, second, AttemptResult.EXECUTED)
    assert [r["resultado"] for r in ledger.attempts(conv)] == ["pendente", "executado"]
    # Only the answered call has a link: the killed one is absent from the links' evidence.
    assert ledger.attempt_results(conversation_id=conv, subject="4821", tool=REFUND, limit=4) == ["executado"]


def _hammer(endpoint: str, table: str, conv: str, ceiling: int, started: Any) -> None:
    """Register and answer attempts at one key as fast as possible until killed."""
    ledger = _ledger(endpoint, table)
    started.release()
    while True:
        attempt = ledger.register_attempt(conversation_id=conv, subject="4821", tool=REFUND, ceiling=ceiling)
        if attempt.allowed:
            answer(ledger, attempt, AttemptResult.EXECUTED, detail=f"n{attempt.number}")


def test_writers_killed_at_random_points_never_misplace_a_record(local_stack):
    """Three processes number and answer attempts at one key, each SIGKILLed at a
    random moment (mid-request included). Whatever was cut: one record per listed
    number, every answered record carries ITS number, no refused record is answered,
    and at most ``ceiling`` are allowed."""
    import random

    ceiling = 12
    table, conv = _fresh_table(local_stack.aws_endpoint), f"conv-hammer-{uuid.uuid4().hex[:6]}"
    started = mp.get_context("spawn").Semaphore(0)
    processes = [_spawn(_hammer, local_stack.aws_endpoint, table, conv, ceiling, started) for _ in range(3)]
    try:
        for _ in processes:
            assert started.acquire(timeout=120)
        for process in processes:
            time.sleep(random.uniform(0.05, 0.4))
            _kill(process)
    finally:
        for process in processes:
            if process.is_alive():
                _kill(process)
    ledger = _ledger(local_stack.aws_endpoint, table)
    counter = ledger.table.get(counter_pk(conv, "4821", REFUND))
    records = sorted(ledger.attempts(conv), key=lambda r: r["tentativaNumero"])
    total = int(counter["tentativas"])
    assert total >= 1
    assert [r["tentativaNumero"] for r in records] == list(range(1, min(total, ceiling + REFUSALS_LISTED) + 1))
    assert int(counter.get("recusasNaoListadas", 0)) == total - len(records)
    for record in records:
        if record["resultado"] == "executado":
            assert record["detalhe"] == f"n{record['tentativaNumero']}" and record["decisao"] == "permitida"
        else:  # killed before its answer, or refused
            assert record["resultado"] == ("pendente" if record["tentativaNumero"] <= ceiling else "bloqueado_por_teto")
    assert sum(r["decisao"] == "permitida" for r in records) == min(total, ceiling)


_ids = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="#"), min_size=1, max_size=40)
_details = st.one_of(st.none(), st.text(max_size=RESULT_DETAIL_MAX + 100))


@pytest.fixture(scope="module")
def moto_ledger() -> Any:
    with pytest.MonkeyPatch.context() as patch, mock_aws():
        patch.delenv("AWS_ENDPOINT_URL", raising=False)  # in-process moto, never a running server
        client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing")
        client.create_table(**table_definition("tentativas-hipotese"))
        yield Ledger("tentativas-hipotese", client)


@given(subject=_ids, tool=_ids, order=st.one_of(st.none(), _ids), details=st.lists(_details, min_size=1, max_size=6),
       ceiling=st.integers(min_value=1, max_value=5))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_ids_and_details_read_back_as_written(moto_ledger, subject, tool, order, details, ceiling):
    conv = f"conv-{uuid.uuid4().hex[:8]}"
    attempts = [moto_ledger.register_attempt(conversation_id=conv, subject=subject, tool=tool, ceiling=ceiling,
                                             order_id=order) for _ in details]
    for attempt, detail in zip(attempts, details, strict=False):
        if attempt.allowed:
            answer(moto_ledger, attempt, AttemptResult.REFUSED_BY_TOOL, detail)
    records = sorted(moto_ledger.attempts(conv), key=lambda r: r["tentativaNumero"])
    assert [a.number for a in attempts] == list(range(1, len(details) + 1))
    assert [r["tentativaNumero"] for r in records] == list(range(1, min(len(details), ceiling + REFUSALS_LISTED) + 1))
    assert [a.allowed for a in attempts] == [n <= ceiling for n in range(1, len(details) + 1)]
    for record, attempt, detail in zip(records, attempts, details, strict=False):
        assert (record["assunto"], record["ferramenta"], record["pedidoId"]) == (subject, tool, order)
        assert record["decisao"] == ("permitida" if attempt.allowed else "bloqueada_por_teto")
        if attempt.allowed:
            assert record["resultado"] == "recusado_pela_ferramenta"
            assert record.get("detalhe") == (detail[:RESULT_DETAIL_MAX] if detail else None)
        else:
            assert record["resultado"] == "bloqueado_por_teto" and "detalhe" not in record
    item_bytes = len(str(moto_ledger.table.get(counter_pk(conv, subject, tool))).encode())
    assert item_bytes < 400 * 1024  # DynamoDB's item limit, with room: the list is bounded


@given(bad=st.sampled_from(["", "a#b", "#"]), where=st.sampled_from(["conversation_id", "subject", "tool"]))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_an_id_that_could_collide_is_refused_before_any_write(moto_ledger, bad, where):
    ids = {"conversation_id": f"conv-{uuid.uuid4().hex[:8]}", "subject": "4821", "tool": REFUND} | {where: bad}
    before = moto_ledger.client.scan(TableName="tentativas-hipotese", Select="COUNT")["Count"]
    with pytest.raises(ValueError):
        moto_ledger.register_attempt(**ids, ceiling=4)
    assert moto_ledger.client.scan(TableName="tentativas-hipotese", Select="COUNT")["Count"] == before

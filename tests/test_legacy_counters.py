"""A counter written by the release before attempt records lived on it keeps working.

That release left ``tentativas`` (the atomic number) and one ``tentativa#`` item per
attempt, no ``registros`` list. The append's condition refuses such an item, so
without a conversion every later attempt would be unlisted, hence refused: a
conversation in flight during the deploy handed to a person for nothing. These
tests write the legacy item as that release did and race new code against it on
the local stack's moto server (requests serialized, as DynamoDB applies each
atomically), from separate OS processes.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import uuid
from typing import Any

from cadencia_shared.ledger import AttemptResult, Ledger, table_definition
from cadencia_shared.ledger.attempts import RECORDS_BASE, REFUSALS_LISTED
from cadencia_shared.ledger.table import counter_pk
from tests.support.call_links import answer

REFUND = "emitir_reembolso"
CEILING = 4


def _ledger(endpoint: str, table: str) -> Ledger:
    from scripts.local_stack.aws import session_client

    return Ledger(table, session_client("dynamodb", endpoint))


def _legacy_table(endpoint: str, conv: str, attempts: int) -> str:
    """A fresh table holding the counter as the previous release wrote it
    (``ADD tentativas :um SET tipo = :tipo, atualizadoEm = :agora``)."""
    from scripts.local_stack.aws import session_client

    table = f"cadencia-legado-{uuid.uuid4().hex[:10]}"
    client = session_client("dynamodb", endpoint)
    client.create_table(**table_definition(table))
    client.put_item(TableName=table, Item={
        "pk": {"S": counter_pk(conv, "4821", REFUND)}, "tipo": {"S": "contador_tentativas"},
        "tentativas": {"N": str(attempts)}, "atualizadoEm": {"S": "2026-11-30T10:00:00.000Z"}})
    return table


def _race(endpoint: str, table: str, conv: str, threads: int, start: Any, out: Any) -> None:
    """``threads`` threads of one process register one attempt each, released together."""
    ledger = _ledger(endpoint, table)
    results: list[tuple[int, bool, bool]] = []
    gate = threading.Barrier(threads)

    def one() -> None:
        gate.wait()
        attempt = ledger.register_attempt(conversation_id=conv, subject="4821", tool=REFUND, ceiling=CEILING,
                                          order_id="4821")
        results.append((attempt.number, attempt.allowed, attempt.listed))

    workers = [threading.Thread(target=one) for _ in range(threads)]
    start.wait()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put(results)


def test_twenty_racers_on_a_legacy_counter_at_two_get_exactly_two_more_allowed(local_stack):
    """4 processes x 5 threads against a legacy counter at 2: the numbers 3..22 each
    once (the same atomic ADD), exactly 2 allowed (3 and 4: the legacy attempts count),
    the conversion done once (``registrosBase`` 2), the listed records 3..8 and the
    rest counted unlisted."""
    conv = f"conv-legado-{uuid.uuid4().hex[:6]}"
    table = _legacy_table(local_stack.aws_endpoint, conv, 2)
    context = mp.get_context("spawn")
    start, out = context.Event(), context.Queue()
    processes = [context.Process(target=_race, args=(local_stack.aws_endpoint, table, conv, 5, start, out))
                 for _ in range(4)]
    for process in processes:
        process.start()
    start.set()
    results = [row for _ in processes for row in out.get(timeout=180)]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sorted(number for number, _, _ in results) == list(range(3, 23))
    assert sorted(number for number, allowed, _ in results if allowed) == [3, 4]
    assert all(listed == (number <= CEILING + REFUSALS_LISTED) for number, _, listed in results)
    ledger = _ledger(local_stack.aws_endpoint, table)
    counter = ledger.table.get(counter_pk(conv, "4821", REFUND))
    assert (int(counter["tentativas"]), int(counter[RECORDS_BASE]), int(counter["recusasNaoListadas"])) == (22, 2, 14)
    records = list(ledger.attempts(conv))
    assert [r["tentativaNumero"] for r in sorted(records, key=lambda r: r["tentativaNumero"])] == list(range(3, 9))
    assert [r["decisao"] for r in sorted(records, key=lambda r: r["tentativaNumero"])] == (
        ["permitida"] * 2 + ["bloqueada_por_teto"] * 4)


def test_a_legacy_counter_is_converted_once_and_its_next_attempt_is_answered_in_its_own_record(local_stack):
    """Sequential: the legacy counter at 1 allows attempt 2, whose answer lands on
    ``registros[0]`` and its link joins it as attempt 2; attempts 3, 4 follow, 5 is refused."""
    conv = f"conv-legado-{uuid.uuid4().hex[:6]}"
    ledger = _ledger(local_stack.aws_endpoint, _legacy_table(local_stack.aws_endpoint, conv, 1))
    attempts = [ledger.register_attempt(conversation_id=conv, subject="4821", tool=REFUND, ceiling=CEILING,
                                        order_id="4821") for _ in range(4)]
    assert [(a.number, a.allowed, a.listed) for a in attempts] == [
        (2, True, True), (3, True, True), (4, True, True), (5, False, True)]
    answer(ledger, attempts[0], AttemptResult.EXECUTED)
    assert [(r["tentativaNumero"], r["resultado"]) for r in ledger.attempts(conv)] == [
        (2, "executado"), (3, "pendente"), (4, "pendente"), (5, "bloqueado_por_teto")]


def test_a_legacy_counter_past_the_listed_refusals_is_refused_unlisted_without_looping(local_stack):
    """At ``ceiling + REFUSALS_LISTED`` the converted list takes no record: the next
    attempt is numbered by the unlisted ADD (one conversion, one retry, no loop)."""
    conv = f"conv-legado-{uuid.uuid4().hex[:6]}"
    ledger = _ledger(local_stack.aws_endpoint,
                     _legacy_table(local_stack.aws_endpoint, conv, CEILING + REFUSALS_LISTED))
    attempt = ledger.register_attempt(conversation_id=conv, subject="4821", tool=REFUND, ceiling=CEILING)
    assert (attempt.number, attempt.allowed, attempt.listed) == (CEILING + REFUSALS_LISTED + 1, False, False)
    counter = ledger.table.get(counter_pk(conv, "4821", REFUND))
    assert counter["registros"] == [] and int(counter[RECORDS_BASE]) == CEILING + REFUSALS_LISTED

"""The retry ceiling's refusal decided from the conversation's exhausted keys:
counters only grow, so a key whose counter has returned a number >= the ceiling refuses
every later attempt; the turn knows it from the lease, and the refusal costs the lease,
its one audit link and the commit — 3 writes, no counter write.

Real moto server (the local stack), the real orchestrator and audit chain, separate OS
processes racing, and a SIGKILL between the refusal's link and the commit."""

from __future__ import annotations

import multiprocessing as mp
import signal
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.ledger import Ledger, table_definition
from cadencia_shared.ledger.exhausted import (
    EXHAUSTED_ATTRIBUTE,
    EXHAUSTED_KEYS_KEPT,
    ExhaustedAttempts,
    exhausted_from_item,
    exhausted_key,
)
from cadencia_shared.ledger.table import conversation_pk, counter_pk
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client
from tests.test_audit_chain import anchored, audit  # noqa: F401
from tests.test_audit_commit_anchor import _own_tool_use_ids

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

REFUND, ORDER = "emitir_reembolso", "4821"
IDEMPOTENT = {"ok": True, "resultado": "bloqueado_por_idempotencia", "dados": {}}
WRITES = {"put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item"}


class RecordingClient:
    """The real client, recording every write as (operation, table, key)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[tuple[str, str, str]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in WRITES:
            return method

        def recorded(**kwargs: Any) -> Any:
            key = kwargs.get("Key") or kwargs.get("Item") or {}
            first = next(iter(key.values()), {})
            self.writes.append((name, kwargs.get("TableName", ""), str(next(iter(first.values()), ""))))
            return method(**kwargs)

        return recorded


def _ledger(chain: AuditChain, client: Any = None) -> Ledger:
    """A fresh environment's ledger over ``chain``'s tables (no memory of heads)."""
    client = client or chain.client
    return Ledger(chain.anchor_table, client,
                  audit_chain=AuditChain(chain.table_name, client, anchor_table=chain.anchor_table))


def _refund() -> dict[str, Any]:
    return tool_use(REFUND, {"pedidoId": ORDER, "valor": 189.9}, text="Vou tentar de novo.")


def _turn(ledger: Ledger, conv: str, message: str, *steps: Any, invoker: CountingInvoker | None = None) -> Any:
    orch, _ = build(ScriptedModel(*steps), ledger, invoker or CountingInvoker(answer=IDEMPOTENT))
    return orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=message, mensagem="e o reembolso?"),
                       Deadline.after(60))


def _four_attempts(ledger: Ledger, conv: str) -> None:
    """Turn 1: the ceiling's four allowed attempts, then a reply (the 4th marks the key)."""
    reply = _turn(ledger, conv, "m-1", *[_refund() for _ in range(4)], text_reply("Já pedi."))
    assert reply.status == "ativa"


def _ceiling_links(chain: AuditChain, conv: str) -> list[dict[str, Any]]:
    import json

    return [json.loads(r["detalhes"]) for r in chain.records(conv) if r["evento"] == "TETO_DE_TENTATIVAS_ATINGIDO"]


def _hand_back(chain: AuditChain, conv: str) -> None:
    """An operator returns the conversation to the bot."""
    chain.client.update_item(TableName=chain.anchor_table, Key={"pk": {"S": conversation_pk(conv)}},
                             UpdateExpression="SET #s = :a", ExpressionAttributeNames={"#s": "status"},
                             ExpressionAttributeValues={":a": {"S": "ativa"}})


def _counter(ledger: Ledger, conv: str) -> dict[str, Any]:
    return ledger.table.get(counter_pk(conv, ORDER, REFUND))


def _listed(ledger: Ledger, conv: str) -> list[tuple[int, str]]:
    return [(a["tentativaNumero"], a["resultado"]) for a in ledger.attempts(conv)]


ALLOWED = [(n, "bloqueado_por_idempotencia") for n in range(1, 5)]


def test_a_refusal_the_conversation_knows_costs_three_writes_and_no_counter_write(anchored):  # noqa: F811
    conv = f"conv-marca-{uuid.uuid4().hex[:6]}"
    _four_attempts(_ledger(anchored), conv)
    stored = anchored.client.get_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv)}})
    assert exhausted_from_item({EXHAUSTED_ATTRIBUTE: {k: int(v["N"]) for k, v in
                                                      stored["Item"][EXHAUSTED_ATTRIBUTE]["M"].items()}}) == {
        exhausted_key(ORDER, REFUND): 4}

    recording = RecordingClient(anchored.client)
    invoker = CountingInvoker(answer=IDEMPOTENT)
    reply = _turn(_ledger(anchored, recording), conv, "m-2", _refund(), invoker=invoker)

    assert (reply.status, reply.motivo) == ("aguardando_humano", "teto")
    assert invoker.calls[REFUND] == 0
    assert [(op, key.split("#")[0]) for op, _, key in recording.writes] == [
        ("update_item", "conversa"), ("put_item", conv), ("update_item", "conversa")]  # lease, link, commit
    assert int(_counter(_ledger(anchored), conv)["tentativas"]) == 4  # untouched
    (link,) = _ceiling_links(anchored, conv)
    assert link == {"ferramenta": REFUND, "assunto": ORDER, "pedidoId": ORDER, "tentativaNumero": 5, "teto": 4,
                    "motivo": "teto", "mensagemId": "m-2"}  # the fields of any refusal's link, no more
    (*_, listed) = _ledger(anchored).attempts(conv)  # its record has the counter's series fields
    assert listed["chaveIdempotencia"] == _counter(_ledger(anchored), conv)["chaveIdempotencia"]
    assert _listed(_ledger(anchored), conv) == [*ALLOWED, (5, "bloqueado_por_teto")]
    assert anchored.verify(conv)[1] is None

    _hand_back(anchored, conv)  # the next refusal is numbered past the last one, still without the counter
    recording = RecordingClient(anchored.client)
    _turn(_ledger(anchored, recording), conv, "m-3", _refund(), invoker=invoker)
    assert len(recording.writes) == 3 and invoker.calls[REFUND] == 0
    assert [link["tentativaNumero"] for link in _ceiling_links(anchored, conv)] == [5, 6]
    assert _listed(_ledger(anchored), conv) == [*ALLOWED, (5, "bloqueado_por_teto"), (6, "bloqueado_por_teto")]


def test_a_conversation_item_without_the_marks_uses_the_counter_as_before(anchored):  # noqa: F811
    conv = f"conv-antiga-{uuid.uuid4().hex[:6]}"
    _four_attempts(_ledger(anchored), conv)
    anchored.client.update_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv)}},
                                UpdateExpression=f"REMOVE {EXHAUSTED_ATTRIBUTE}")  # as an older release left it
    recording = RecordingClient(anchored.client)
    _turn(_ledger(anchored, recording), conv, "m-2", _refund())
    assert [key.split("#")[0] for _, _, key in recording.writes] == ["conversa", "contador", conv, "conversa"]
    (link,) = _ceiling_links(anchored, conv)
    assert link["tentativaNumero"] == 5 and int(_counter(_ledger(anchored), conv)["tentativas"]) == 5
    assert _listed(_ledger(anchored), conv) == [*ALLOWED, (5, "bloqueado_por_teto")]  # listed once, from the counter


def _turn_killed_at_its_commit(endpoint: str, audit_table: str, ledger_table: str, conv: str) -> None:
    import os

    _own_tool_use_ids()
    ledger = _ledger(AuditChain(audit_table, session_client("dynamodb", endpoint), anchor_table=ledger_table))
    ledger.commit_conversation = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
    _turn(ledger, conv, "m-2", _refund())


def test_a_turn_sigkilled_between_the_refusals_link_and_its_commit(anchored, local_stack):  # noqa: F811
    """The link is written (the decision is evidenced), the advanced mark is not: the
    redelivered message is refused again from the stored mark with the SAME number —
    two decisions, two links, both listed (the documented collision of a mark behind
    its key). Nothing was invoked and the counter never moved."""
    conv = f"conv-morta-{uuid.uuid4().hex[:6]}"
    _four_attempts(_ledger(anchored), conv)
    proc = mp.get_context("spawn").Process(target=_turn_killed_at_its_commit, args=(
        local_stack.aws_endpoint, anchored.table_name, anchored.anchor_table, conv))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == -signal.SIGKILL
    assert [link["tentativaNumero"] for link in _ceiling_links(anchored, conv)] == [5]
    anchored.client.update_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv)}},
                                UpdateExpression="SET leaseAteMs = :z", ExpressionAttributeValues={":z": {"N": "0"}})
    invoker = CountingInvoker(answer=IDEMPOTENT)
    reply = _turn(_ledger(anchored), conv, "m-2", _refund(), invoker=invoker)  # the redelivery
    assert reply.motivo == "teto" and invoker.calls[REFUND] == 0
    assert [link["tentativaNumero"] for link in _ceiling_links(anchored, conv)] == [5, 5]
    assert _listed(_ledger(anchored), conv) == [*ALLOWED, (5, "bloqueado_por_teto"), (5, "bloqueado_por_teto")]
    assert int(_counter(_ledger(anchored), conv)["tentativas"]) == 4
    assert anchored.verify(conv)[1] is None


def _racer(endpoint: str, table: str, conv: str, with_state: bool, decisions: int, barrier: Any, out: Any) -> None:
    """One OS process deciding ``decisions`` attempts in a row at one key: with a turn's
    state (its marks fill as its counter numbers reach the ceiling) or without (the
    approval resume's path: always the counter)."""
    from cadencia_shared.catalog import TOOLS
    from orchestrator.controls import CallContext, RetryCeiling
    from orchestrator.tools import ToolCall

    ceiling = RetryCeiling(Ledger(table, session_client("dynamodb", endpoint)), 4)
    call = ToolCall(spec=TOOLS[REFUND], tool_use_id="t", arguments={"pedidoId": ORDER, "valor": 1},
                    conversation_id=conv, customer_id=1001)
    marks = ExhaustedAttempts() if with_state else None
    barrier.wait()
    got = []
    for _ in range(decisions):
        from_mark = marks is not None and marks.numbers.get(exhausted_key(ORDER, REFUND), 0) >= 4
        refusal = ceiling.before(CallContext(call, Deadline.after(60), exhausted=marks))
        got.append((refusal is None, from_mark, None if refusal is None else refusal.details["tentativaNumero"]))
    out.put(got)


@pytest.mark.parametrize("round_", range(2))
def test_racing_processes_with_and_without_marks_allow_exactly_four(local_stack, round_):
    """12 OS processes, 4 decisions each, at one key: half carry a turn's marks. Exactly
    4 are allowed; the counter numbers every decision not taken from a mark exactly
    once; every decision taken from a mark is a refusal."""
    ctx = mp.get_context("spawn")
    table = f"cadencia-marcas-{uuid.uuid4().hex[:10]}"
    session_client("dynamodb", local_stack.aws_endpoint).create_table(**table_definition(table))
    conv, processes, per = f"conv-corrida-{round_}", 12, 4
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(local_stack.aws_endpoint, table, conv, i % 2 == 0, per, barrier, out))
             for i in range(processes)]
    for proc in procs:
        proc.start()
    results = [decision for _ in procs for decision in out.get(timeout=180)]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert len(results) == processes * per
    assert sum(allowed for allowed, _, _ in results) == 4
    assert not [r for r in results if r[1] and r[0]]  # a mark only ever refuses
    counter = Ledger(table, session_client("dynamodb", local_stack.aws_endpoint)).table.get(
        counter_pk(conv, ORDER, REFUND))
    from_counter = [r for r in results if not r[1]]
    assert int(counter["tentativas"]) == len(from_counter)  # each counted decision numbered once
    assert [r for r in results if r[1]], "no process decided from its marks: the race did not test them"


def test_the_marks_are_bounded_and_keep_the_newest_keys():
    marks = ExhaustedAttempts()
    for i in range(EXHAUSTED_KEYS_KEPT + 5):
        marks.note(f"pedido-{i}", REFUND, 4, 4)
    marks.note("pedido-0", REFUND, 9, 4)  # noted again: now the newest
    kept = marks.numbers
    assert len(kept) == EXHAUSTED_KEYS_KEPT
    assert kept[exhausted_key("pedido-0", REFUND)] == 9
    assert exhausted_key("pedido-1", REFUND) not in kept
    marks.note("pedido-novo", REFUND, 3, 4)  # below the ceiling: not a mark
    assert exhausted_key("pedido-novo", REFUND) not in marks.numbers


@pytest.mark.parametrize("stored", [None, "x", {"abc": 5}, {exhausted_key("1", REFUND): True},
                                    {exhausted_key("1", REFUND): "5"}, {exhausted_key("1", REFUND): None},
                                    {exhausted_key("1", REFUND): Decimal("4.5")}, {exhausted_key("1", REFUND): -1}])
def test_malformed_stored_marks_are_dropped_never_trusted(stored):
    """A dropped mark only sends its key back to the counter."""
    assert exhausted_from_item({} if stored is None else {EXHAUSTED_ATTRIBUTE: stored}) == {}


def test_stored_marks_read_back_from_dynamodb_numbers():
    assert exhausted_from_item({EXHAUSTED_ATTRIBUTE: {exhausted_key("1", REFUND): Decimal("7")}}) == {
        exhausted_key("1", REFUND): 7}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["4821", "4822", "cliente-1"]), st.integers(1, 12)), max_size=40),
       st.integers(1, 8))
def test_a_mark_refuses_only_what_the_counter_already_took_past_the_ceiling(noted, ceiling):
    """Whatever counter answers a turn notes, a key is refused from the marks only
    when some answer for it reached the ceiling, and numbered past every answer seen."""
    marks = ExhaustedAttempts()
    highest: dict[str, int] = {}
    for subject, number in noted:
        marks.note(subject, REFUND, number, ceiling)
        highest[subject] = max(highest.get(subject, 0), number)
    for subject in ("4821", "4822", "cliente-1", "9999"):
        refused = marks.refused_number(subject, REFUND, ceiling)
        if highest.get(subject, 0) < ceiling:
            assert refused is None
        else:
            assert refused == highest[subject] + 1


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=20), st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6),
                                                       st.text(max_size=5), st.decimals(allow_nan=False))))
def test_any_stored_map_reads_back_as_integral_marks_only(stored):
    for key, number in exhausted_from_item({EXHAUSTED_ATTRIBUTE: stored}).items():
        assert len(key) == 16 and type(number) is int and number >= 0

"""Red team of the read-decided ceiling refusal: hostile stored marks.

A mark is a number the counter returned; the turn that refuses from it numbers the
refusal mark + 1 and its commit stores that number back. A stored number DynamoDB
can hold (38 significant digits, magnitude up to 1E+125) but whose successor it
cannot (``Decimal('1E+40') + 1`` needs 41 digits) made that commit raise
``decimal.Inexact`` before it was sent: every turn refused at that key crashed
after writing its link, and the redelivered message did the same, forever. Such
a mark is no number the counter can have returned: it is dropped (its key goes
back to the counter, which decides)."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared.ledger.exhausted import (
    EXHAUSTED_ATTRIBUTE,
    ExhaustedAttempts,
    exhausted_from_item,
    exhausted_key,
)
from cadencia_shared.ledger.table import conversation_pk, serialize
from tests.test_audit_chain import anchored, audit  # noqa: F401
from tests.test_ceiling_hint import (
    ALLOWED,
    REFUND,
    _ceiling_links,
    _counter,
    _four_attempts,
    _ledger,
    _listed,
    _refund,
    _turn,
)

from .support.orchestrators import CountingInvoker

HOSTILE_NUMBERS = ["1E+40", "99999999999999999999999999999999999999", "1E+125"]


@settings(max_examples=300, deadline=None)
@given(st.decimals(min_value=0, max_value=Decimal("1E+125"), allow_nan=False, allow_infinity=False, places=0),
       st.integers(1, 8))
def test_whatever_mark_is_read_the_commit_can_store_its_refusals(number, ceiling):
    """Any integral number DynamoDB may hand back: the marks read from it, advanced by
    refusals, serialize for the commit (else the turn crashes at its commit)."""
    key = exhausted_key("4821", REFUND)
    marks = ExhaustedAttempts(exhausted_from_item({EXHAUSTED_ATTRIBUTE: {key: number}}))
    for _ in range(3):
        marks.refused_number("4821", REFUND, ceiling)
    serialize({":tetos": marks.numbers})  # raises decimal.Inexact/Rounded on a number past 38 digits


@pytest.mark.parametrize("hostile", HOSTILE_NUMBERS)
def test_a_hostile_stored_mark_sends_its_key_back_to_the_counter(anchored, hostile):
    """End to end on the local stack: a stored mark of, say, 1E+40 at an exhausted key.
    The next refusal turn completes (was: the commit raised decimal.Inexact after the
    link was written, and every redelivery did the same), numbered by the counter."""
    conv = f"conv-marca-hostil-{uuid.uuid4().hex[:6]}"
    _four_attempts(_ledger(anchored), conv)
    key = exhausted_key("4821", REFUND)
    anchored.client.update_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv)}},
                                UpdateExpression=f"SET {EXHAUSTED_ATTRIBUTE}.#k = :n",
                                ExpressionAttributeNames={"#k": key}, ExpressionAttributeValues={":n": {"N": hostile}})
    invoker = CountingInvoker()
    reply = _turn(_ledger(anchored), conv, "m-2", _refund(), invoker=invoker)
    assert (reply.status, reply.motivo) == ("aguardando_humano", "teto")
    assert invoker.calls[REFUND] == 0
    (link,) = _ceiling_links(anchored, conv)
    assert link["tentativaNumero"] == 5
    assert int(_counter(_ledger(anchored), conv)["tentativas"]) == 5
    assert _listed(_ledger(anchored), conv) == [*ALLOWED, (5, "bloqueado_por_teto")]
    stored = anchored.client.get_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv)}})
    assert stored["Item"][EXHAUSTED_ATTRIBUTE]["M"][key] == {"N": "5"}  # the counter's number replaced it
    assert anchored.verify(conv)[1] is None


def _turn_killed_at(endpoint: str, audit_table: str, ledger_table: str, conv: str, where: str) -> None:
    """A refusal turn from the stored mark, SIGKILLed ``where``: before its link is
    written, or after its commit was written (before anything answers the caller)."""
    import os
    import signal

    from cadencia_shared.audit_chain import AuditChain
    from scripts.local_stack.aws import session_client
    from tests.test_audit_commit_anchor import _own_tool_use_ids

    _own_tool_use_ids()
    ledger = _ledger(AuditChain(audit_table, session_client("dynamodb", endpoint), anchor_table=ledger_table))
    append, commit = ledger.append_audit, ledger.commit_conversation

    def append_then_maybe_die(**kwargs):
        if where == "before_link" and kwargs.get("event") == "TETO_DE_TENTATIVAS_ATINGIDO":
            os.kill(os.getpid(), signal.SIGKILL)
        return append(**kwargs)

    def commit_then_die(*args, **kwargs):
        commit(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    ledger.append_audit = append_then_maybe_die
    if where == "after_commit":
        ledger.commit_conversation = commit_then_die
    _turn(ledger, conv, "m-2", _refund())


@pytest.mark.parametrize("where", ["before_link", "after_commit"])
def test_a_refusal_turn_sigkilled_at_its_other_writes(anchored, local_stack, where):
    """The refusal path's writes are the lease, the link, the commit (the kill between
    link and commit: tests/test_ceiling_hint.py). Killed after the lease, before the
    link: nothing was decided on record; the redelivery refuses from the mark with 5,
    one link, listed once. Killed after the commit: the redelivery is answered as a
    duplicate; still one link, one listed refusal. Never an invocation, never a
    counter write; the chain verifies."""
    import multiprocessing as mp
    import signal

    conv = f"conv-morta-{where}-{uuid.uuid4().hex[:6]}"
    _four_attempts(_ledger(anchored), conv)
    proc = mp.get_context("spawn").Process(target=_turn_killed_at, args=(
        local_stack.aws_endpoint, anchored.table_name, anchored.anchor_table, conv, where))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == -signal.SIGKILL
    anchored.client.update_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv)}},
                                UpdateExpression="SET leaseAteMs = :z", ExpressionAttributeValues={":z": {"N": "0"}})
    invoker = CountingInvoker()
    reply = _turn(_ledger(anchored), conv, "m-2", _refund(), invoker=invoker)  # the redelivery
    assert invoker.calls[REFUND] == 0
    if where == "after_commit":
        assert reply.duplicada and reply.status == "aguardando_humano"
    else:
        assert (reply.status, reply.motivo) == ("aguardando_humano", "teto")
    assert [link["tentativaNumero"] for link in _ceiling_links(anchored, conv)] == [5]  # decided from the mark:
    assert _listed(_ledger(anchored), conv) == [*ALLOWED, (5, "bloqueado_por_teto")]
    assert int(_counter(_ledger(anchored), conv)["tentativas"]) == 4
    assert anchored.verify(conv)[1] is None


def test_without_an_audit_chain_a_read_decided_refusal_is_listed_with_its_time(local_stack):
    """The orchestrator runs without the chain when AUDIT_TABLE is unset: its links are
    the ledger's ``auditoria#`` items, whose ``registradoEm`` is the history index's sort
    key (``{time}#auditoria#{id}``), not a time. ``Ledger.attempts`` listed a refusal
    decided from the marks with that as its ``timestamp`` (prova's and the deployed
    check's records then carry it); the item's ``timestamp`` is the time."""
    import re

    from cadencia_shared.ledger import Ledger, table_definition
    from scripts.local_stack.aws import session_client

    client = session_client("dynamodb", local_stack.aws_endpoint)
    table = f"cadencia-sem-cadeia-{uuid.uuid4().hex[:10]}"
    client.create_table(**table_definition(table))
    ledger = Ledger(table, client)  # no audit chain
    conv = f"conv-sem-cadeia-{uuid.uuid4().hex[:6]}"
    _four_attempts(ledger, conv)
    reply = _turn(ledger, conv, "m-2", _refund())
    assert reply.motivo == "teto"
    listed = list(Ledger(table, client).attempts(conv))
    assert [(a["tentativaNumero"], a["decisao"]) for a in listed][-1] == (5, "bloqueada_por_teto")
    assert int(ledger.table.get(f"contador#{conv}#4821#{REFUND}")["tentativas"]) == 4  # decided from the mark
    iso = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")
    assert [a["timestamp"] for a in listed if not iso.match(a["timestamp"])] == []


def test_a_mark_never_reaches_another_conversation_subject_or_tool(anchored):
    """Conversation A's key (4821, emitir_reembolso) is marked. In conversation B the
    same key is numbered by B's own counter (1, allowed: no ceiling link); in A the
    same order with another tool, and another order with the same tool, are numbered
    by their counters and invoked. Only A's marked key is refused from the mark."""
    from .support.anthropic_fake import text_reply, tool_use

    conv_a, conv_b = (f"conv-isolada-{x}-{uuid.uuid4().hex[:6]}" for x in "ab")
    _four_attempts(_ledger(anchored), conv_a)
    _turn(_ledger(anchored), conv_b, "m-1", _refund(), text_reply("Pedi."))
    assert _ceiling_links(anchored, conv_b) == []
    assert int(_ledger(anchored).table.get(
        f"contador#{conv_b}#4821#{REFUND}")["tentativas"]) == 1

    invoker = CountingInvoker()
    status = tool_use("consultar_status_pedido", {"pedidoId": "4821"})
    other_order = tool_use(REFUND, {"pedidoId": "4822", "valor": 10.0})
    reply = _turn(_ledger(anchored), conv_a, "m-2", status, other_order, text_reply("Mais alguma dúvida?"),
                  invoker=invoker)
    assert reply.status == "ativa" and _ceiling_links(anchored, conv_a) == []
    assert invoker.calls["consultar_status_pedido"] >= 1 and invoker.calls[REFUND] == 1
    stored = anchored.client.get_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv_a)}})
    assert stored["Item"][EXHAUSTED_ATTRIBUTE]["M"] == {exhausted_key("4821", REFUND): {"N": "4"}}

    reply = _turn(_ledger(anchored), conv_a, "m-3", _refund(), invoker=invoker)  # the marked key itself
    assert reply.motivo == "teto" and invoker.calls[REFUND] == 1
    assert [link["tentativaNumero"] for link in _ceiling_links(anchored, conv_a)] == [5]
    assert int(_ledger(anchored).table.get(f"contador#{conv_a}#4821#{REFUND}")["tentativas"]) == 4  # from the mark


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=300), st.text(max_size=60), st.integers(0, 10**9)), max_size=80),
       st.integers(1, 50))
def test_hostile_subjects_and_tools_keep_the_marks_small(noted, ceiling):
    """Whatever subjects and tools a turn notes (any text, any length), the commit
    stores at most 32 fixed-size keys with numbers it can serialize: the map's size
    does not depend on the input (the conversation item stays far under 400 KB)."""
    marks = ExhaustedAttempts()
    for subject, tool, number in noted:
        marks.note(subject, tool, number, ceiling)
        marks.refused_number(subject, tool, ceiling)
    stored = marks.numbers
    assert len(stored) <= 32 and all(len(key) == 16 for key in stored)
    assert len(str(serialize({":tetos": stored}))) <= 32 * 48 + 16
    # Read back: each mark as stored, or dropped past 10^9 (its key back to the counter).
    read_back = exhausted_from_item({EXHAUSTED_ATTRIBUTE: {k: Decimal(v) for k, v in stored.items()}})
    assert read_back.items() <= stored.items()
    assert {k: v for k, v in stored.items() if v <= 10**9} == read_back

"""Red team of the read-decided ceiling refusal (issue 14): hostile stored marks.

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
def test_a_hostile_stored_mark_sends_its_key_back_to_the_counter(anchored, hostile):  # noqa: F811
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
    assert (link["tentativaNumero"], link["origem"]) == (5, "contador")
    assert int(_counter(_ledger(anchored), conv)["tentativas"]) == 5
    assert _listed(_ledger(anchored), conv) == [*ALLOWED, (5, "bloqueado_por_teto")]
    stored = anchored.client.get_item(TableName=anchored.anchor_table, Key={"pk": {"S": conversation_pk(conv)}})
    assert stored["Item"][EXHAUSTED_ATTRIBUTE]["M"][key] == {"N": "5"}  # the counter's number replaced it
    assert anchored.verify(conv)[1] is None

"""The output contract's shape check (``orchestrator/answer_shape.py``) against the
validator it replaced, ``jsonschema``'s Draft 2020-12: the same answers accepted and
refused, on near-valid answers mutated one step at a time and on arbitrary JSON."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from orchestrator import answer_shape
from orchestrator import money_sentences as ms
from orchestrator.output_contract import NOT_MADE_REASONS, SCHEMA, review
from orchestrator.statements import HOW_REFUNDS_WORK

REFERENCE = Draft202012Validator(SCHEMA)


def _same_verdict(answer: Any) -> None:
    new = list(answer_shape.errors(SCHEMA, answer))
    old = list(REFERENCE.iter_errors(answer))
    assert (not new) == (not old), (answer, [e.message for e in new], [e.message for e in old])


def test_the_shape_check_knows_every_keyword_of_the_schema():
    assert answer_shape.unknown_keywords(SCHEMA) == set()
    assert answer_shape.unknown_keywords({"type": "string", "format": "email"}) == {"format"}


def test_the_orchestrator_imports_no_jsonschema():
    code = "import sys, orchestrator.handler; print(sorted(m for m in sys.modules if m.startswith('jsonschema')))"
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'functions'}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"


ORDERS = st.one_of(st.sampled_from(["4821", "A-77", "x" * 64, "x" * 65, "4821\n", "", " 4821", "48 21", "ção"]),
                   st.text(max_size=70))
NUMBERS = st.one_of(st.sampled_from([0, 1, -1, 0.0, 1e-9, 100000, 100000.0, 100000.0001, 100001, True, False]),
                    st.integers(), st.floats(allow_nan=False))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=5), ORDERS)
KINDS = [ms.REFUND_EXECUTED, ms.REFUND_AWAITING_APPROVAL, ms.REFUND_DECLINED, ms.REFUND_UNCONFIRMED,
         ms.REFUND_NOT_MADE, ms.PROFILE_UPDATED, ms.ORDER_STATUS, HOW_REFUNDS_WORK]


@st.composite
def statement(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from([*KINDS, "outro"]))
    item: dict[str, Any] = {"tipo": kind}
    if draw(st.booleans()):
        item["pedidoId"] = draw(ORDERS)
    if draw(st.booleans()):
        item["valor"] = draw(NUMBERS)
    if draw(st.booleans()):
        item["motivo"] = draw(st.sampled_from([*NOT_MADE_REASONS, "outro", 1]))
    if draw(st.booleans()):
        item["campo"] = draw(st.sampled_from([*sorted(ms.FIELDS), "outro"]))
    if draw(st.integers(0, 9)) == 0:
        item[draw(st.sampled_from(["extra", "tipo", "valor"]))] = draw(SCALARS)
    return draw(st.sampled_from([item, item, item, [item], kind, None]))


@st.composite
def answer(draw: st.DrawFn) -> Any:
    out: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        out["texto"] = draw(st.one_of(st.text(max_size=20), st.sampled_from(["", "x" * 1500, "x" * 1501]), SCALARS))
    if draw(st.integers(0, 9)):
        out["precisaDePessoa"] = draw(st.one_of(st.booleans(), SCALARS))
    if draw(st.integers(0, 9)):
        items = draw(st.lists(statement(), max_size=12))
        if items and draw(st.booleans()):
            items.append(items[0])  # a repeat: uniqueItems
        out["declaracoes"] = draw(st.sampled_from([items, items, items, {}, "x"]))
    if draw(st.integers(0, 19)) == 0:
        out["extra"] = 1
    return draw(st.sampled_from([out] * 8 + [[out], None, "texto"]))


JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=12)


@settings(max_examples=600, deadline=None)
@given(answer())
def test_near_valid_answers_get_the_verdict_jsonschema_gives(candidate):
    _same_verdict(candidate)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_arbitrary_json_gets_the_verdict_jsonschema_gives(candidate):
    _same_verdict(candidate)


def test_valid_answers_of_every_kind_are_accepted_by_both():
    for kind, extra in [(ms.REFUND_EXECUTED, {"pedidoId": "4821", "valor": 10.5}),
                        (ms.REFUND_NOT_MADE, {"pedidoId": "4821", "motivo": NOT_MADE_REASONS[0]}),
                        (ms.PROFILE_UPDATED, {"campo": next(iter(ms.FIELDS))}), (HOW_REFUNDS_WORK, {})]:
        candidate = {"texto": "Olá", "precisaDePessoa": False, "declaracoes": [{"tipo": kind, **extra}]}
        assert list(answer_shape.errors(SCHEMA, candidate)) == [] and REFERENCE.is_valid(candidate)


def test_json_equality_follows_json_not_python():
    assert answer_shape.json_equal(1, 1.0) and not answer_shape.json_equal(True, 1)
    assert not answer_shape.json_equal([True], [1]) and answer_shape.json_equal({"a": [1]}, {"a": [1.0]})
    assert not answer_shape.json_equal(None, 0) and not answer_shape.json_equal("1", 1)


class _Nothing:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no ledger read before the shape is valid ({name})")


def test_a_value_that_is_not_finite_is_refused_where_jsonschema_let_nan_pass():
    """The one difference, on purpose: Python's JSON parser reads ``NaN``; jsonschema's
    ``maximum``/``exclusiveMinimum`` comparisons are false for it, so it passed."""
    candidate = {"texto": "Olá", "precisaDePessoa": False,
                 "declaracoes": [{"tipo": ms.REFUND_EXECUTED, "pedidoId": "4821", "valor": math.nan}]}
    assert REFERENCE.is_valid(candidate)
    verdict = review(candidate, conversation_id="c-1", customer_id=1001, evidence=_Nothing())
    assert isinstance(verdict, list) and [v.code for v in verdict] == ["esquema"]
    assert verdict[0].message.startswith("declaracoes/0:")

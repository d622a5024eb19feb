"""Our DynamoDB (de)serializer against boto3's, value for value (hypothesis).

The shipped code stopped importing boto3 (cadencia_shared.dynamo_types module doc);
these tests may, to prove the mapping did not change."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from cadencia_shared.dynamo_types import deserialize, serialize

_boto_ser, _boto_de = TypeSerializer(), TypeDeserializer()
ROOT = Path(__file__).resolve().parents[1]

# Numbers DynamoDB stores exactly: up to 38 significant digits, exponent in range.
decimals = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
    lambda d: len(d.as_tuple().digits) <= 38 and -128 <= d.adjusted() <= 125)
numbers = st.one_of(st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1), decimals)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(), st.binary())
sets = st.one_of(st.frozensets(numbers, min_size=1), st.frozensets(st.text(), min_size=1),
                 st.frozensets(st.binary(), min_size=1))
values = st.recursive(
    st.one_of(scalars, sets),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=20,
)


def _normal(value):
    """A serialized value with sets in a stable order (set iteration order may differ)."""
    if isinstance(value, dict):
        return {k: (sorted(v, key=repr) if k in ("SS", "NS", "BS") else _normal(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


@given(values)
def test_serialize_is_boto3s(value):
    assert _normal(serialize(value)) == _normal(_boto_ser.serialize(value))


@given(values)
def test_deserialize_is_boto3s_with_bytes_for_binary(value):
    wire = _boto_ser.serialize(value)
    ours, theirs = deserialize(wire), _boto_de.deserialize(wire)
    assert ours == theirs  # boto3's Binary compares equal to the same bytes
    assert "Binary" not in repr(ours)  # ours reads binary back as plain bytes
    assert serialize(ours) == serialize(theirs.value if isinstance(theirs, Binary) else ours)


@given(decimals)
def test_numbers_round_trip_with_every_digit(number):
    back = deserialize(serialize(number))
    assert back == number and str(back) == str(_boto_de.deserialize(_boto_ser.serialize(number)))


@pytest.mark.parametrize("value", [
    1.5,  # floats: boto3 refuses them too
    Decimal("1" * 39),  # 39 significant digits: would be rounded
    10**39,
    Decimal("1E+130"),  # out of DynamoDB's range
    Decimal("1.5E-170"),  # below the smallest subnormal: would be rounded away
    Decimal("Infinity"), Decimal("-Infinity"), Decimal("NaN"),  # boto3 lets -Infinity through
    set(), frozenset(),  # boto3 sends {"NS": []}, which DynamoDB rejects
    {1, "a"}, {b"x", "x"}, {True},
    object(), Binary(b"x"),  # boto3's wrapper: nothing we ship produces it any more
])
def test_refused(value):
    with pytest.raises(Exception) as caught:
        serialize(value)
    assert isinstance(caught.value, (TypeError, ArithmeticError))


@pytest.mark.parametrize("wire", [{}, {"X": "1"}, {"N": "1" * 39}])
def test_bad_attribute_values_refused(wire):
    with pytest.raises((TypeError, ArithmeticError)):
        deserialize(wire)


def test_the_shipped_code_imports_no_boto3():
    """The point of the module: no handler's cold import reaches boto3 (or s3transfer).
    (The refund tool's gateway secret does, when a refund first reaches the gateway.)"""
    handlers = ["orchestrator.handler", "consultar_status_pedido.handler", "atualizar_cadastro.handler",
                "emitir_reembolso.handler", "decidir_aprovacao.handler",
                "cadencia_shared.ledger", "cadencia_shared.audit_chain", "orchestrator.circuit_store"]
    code = ("import sys; " + "; ".join(f"import {m}" for m in handlers)
            + "; print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 's3transfer')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "functions")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"

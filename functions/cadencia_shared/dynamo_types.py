"""DynamoDB AttributeValues to and from Python values, with botocore only.

Why our own and not ``boto3.dynamodb.types``: importing anything under ``boto3``
runs ``boto3/__init__`` → ``boto3.compat`` → ``s3transfer.manager``, which costs
about as much again as botocore itself, at every cold start of every Lambda that
reads the ledger or the audit chain (the orchestrator's cold import).
The clients come from botocore (``aws.client``); these ~60 lines are the rest.

Same mapping as boto3's TypeSerializer/TypeDeserializer (proved equal by
``tests/test_dynamo_types.py`` with hypothesis), with three deliberate differences:

- ``B`` and ``BS`` read back as ``bytes``, not boto3's ``Binary`` wrapper;
- an empty set is refused here (boto3 sends ``{"NS": []}``, which DynamoDB rejects);
- every non-finite number is refused (boto3 lets ``-Infinity`` and ``sNaN`` through);
- a boolean in a set is refused (boto3 would store ``{True}`` as the number set ``{1}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from decimal import Clamped, Context, Decimal, Inexact, Overflow, Rounded, Underflow
from typing import Any

# DynamoDB's number range and precision (boto3's DYNAMODB_CONTEXT): a value that
# would be rounded or clamped raises instead of being stored as another amount.
DYNAMODB_CONTEXT = Context(Emin=-128, Emax=126, prec=38, traps=[Clamped, Overflow, Inexact, Rounded, Underflow])
_BINARY = (bytes, bytearray)


def _number(value: int | Decimal) -> str:
    number = DYNAMODB_CONTEXT.create_decimal(value)
    if not number.is_finite():
        raise TypeError("Infinity and NaN not supported")
    return str(number)


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        raise TypeError("Float types are not supported. Use Decimal types instead.")
    return isinstance(value, (int, Decimal)) and not isinstance(value, bool)


def _set(values: Set[Any]) -> dict[str, Any]:
    if not values:
        raise TypeError("An empty set is not a DynamoDB value")
    if all(_is_number(v) for v in values):
        return {"NS": [_number(v) for v in values]}
    if all(isinstance(v, str) for v in values):
        return {"SS": list(values)}
    if all(isinstance(v, _BINARY) for v in values):
        return {"BS": list(values)}
    raise TypeError(f"Unsupported set of mixed types: {values!r}")


def serialize(value: Any) -> dict[str, Any]:
    """One Python value as an AttributeValue (boto3's TypeSerializer.serialize)."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if _is_number(value):
        return {"N": _number(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, _BINARY):
        return {"B": value}
    if isinstance(value, Set):
        return _set(value)
    if isinstance(value, Mapping):
        return {"M": {k: serialize(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"L": [serialize(v) for v in value]}
    raise TypeError(f'Unsupported type "{type(value)}" for value "{value}"')


_READERS: dict[str, Any] = {
    "NULL": lambda _: None,
    "BOOL": lambda v: v,
    "S": lambda v: v,
    "B": bytes,
    "N": DYNAMODB_CONTEXT.create_decimal,
    "SS": set,
    "NS": lambda v: set(map(DYNAMODB_CONTEXT.create_decimal, v)),
    "BS": lambda v: set(map(bytes, v)),
    "L": lambda v: [deserialize(x) for x in v],
    "M": lambda v: {k: deserialize(x) for k, x in v.items()},
}


def deserialize(value: Mapping[str, Any]) -> Any:
    """One AttributeValue as a Python value (boto3's TypeDeserializer.deserialize)."""
    if not value:
        raise TypeError("Value must be a nonempty dictionary whose key is a valid dynamodb type.")
    kind, inner = next(iter(value.items()))
    reader = _READERS.get(kind)
    if reader is None:
        raise TypeError(f"Dynamodb type {kind} is not supported")
    return reader(inner)


def serialize_item(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: serialize(v) for k, v in values.items()}


def deserialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: deserialize(v) for k, v in item.items()}

"""What an approval binds, from a call's arguments: their canonical JSON and digest,
and the amount they move (``approvals`` builds and checks records with these)."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Any

from .catalog import TOOLS


def canonical_arguments(arguments: dict[str, Any]) -> tuple[str, str]:
    """(canonical JSON, its SHA-256): sorted keys, no separators' spaces, amounts as
    JSON numbers (a Decimal 500.00 and a float 500.0 are one amount, written 500.0:
    the tools refuse amounts as strings, and the stored arguments are what runs). A whole
    number is the same JSON number as its float (150 and 150.0 are one amount: the model
    may write either, the tools' types read both alike)."""
    text = json.dumps(_numbers(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=_decimal)
    return text, hashlib.sha256(text.encode()).hexdigest()


def _decimal(value: Any) -> float:
    # Exact for the tools' amounts (≤ 12 digits, 2 decimals): repr of the float
    # is the shortest string that reads back as the same number.
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not canonical JSON: {type(value).__name__}")


def bound_amount(tool: str, arguments: dict[str, Any] | None) -> Decimal | None:
    """The amount a call moves, from its arguments (the tool's approval policy names
    the field); None when the tool has no such policy or the argument is not a number."""
    spec = TOOLS.get(tool)
    policy = spec.approval if spec is not None else None
    value = arguments.get(policy.amount_field) if policy is not None and arguments is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    amount = Decimal(str(value))
    return amount if amount.is_finite() else None


def parse_arguments(text: Any) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def same_amount(stored: Any, amount: Decimal) -> bool:
    return isinstance(stored, Decimal) and stored.is_finite() and stored == amount


_EXACT_FLOAT_INT = 2**53  # beyond it an int has no exact float: left as it is (and differs)


def _numbers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _EXACT_FLOAT_INT:
        return float(value)
    return value

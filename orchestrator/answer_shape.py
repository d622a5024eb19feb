"""The final answer's shape, checked against ``output_contract.SCHEMA`` by a small
interpreter of the JSON Schema keywords that schema uses — not ``jsonschema``,
whose import (with ``referencing``, ``rpds``, ``attrs``) cost ~45 ms of every
orchestrator cold start.

Same verdicts as ``jsonschema``'s Draft 2020-12 validator on every input, with one
deliberate difference: a number that is not finite (``NaN``, which Python's JSON
parser accepts) is refused, where ``jsonschema`` lets ``NaN`` pass ``maximum`` and
``exclusiveMinimum``. ``tests/test_answer_shape.py`` compares both validators on
generated answers (hypothesis) and fails on a keyword this module does not know,
so a schema edit that needs one cannot silently stop being checked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from numbers import Number
from typing import Any

# Keywords that only annotate (no verdict).
ANNOTATIONS = frozenset({"$schema", "description"})
CHECKED = frozenset({"type", "properties", "required", "additionalProperties", "minLength", "maxLength", "pattern",
                     "maxItems", "uniqueItems", "items", "anyOf", "const", "enum", "exclusiveMinimum", "maximum"})


@dataclass(frozen=True)
class ShapeError:
    path: tuple[str | int, ...]
    message: str


def unknown_keywords(schema: Any) -> set[str]:
    """Keywords of ``schema`` this module does not check (a test keeps this empty)."""
    found: set[str] = set()
    if isinstance(schema, list):
        for item in schema:
            found |= unknown_keywords(item)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            if key not in CHECKED and key not in ANNOTATIONS:
                found.add(key)
            if key == "properties":
                for sub in value.values():
                    found |= unknown_keywords(sub)
            elif key in ("items", "anyOf"):
                found |= unknown_keywords(value)
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "number": _is_number,
    "integer": lambda v: _is_number(v) and (isinstance(v, int) or (isinstance(v, float) and v.is_integer())),
    "null": lambda v: v is None,
}


def _json_kind(value: Any) -> str:
    """JSON's kind of a value: booleans apart from numbers, ints and floats one kind."""
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    for kind, types in (("object", dict), ("array", list), ("string", str)):
        if isinstance(value, types):
            return kind
    return "null" if value is None else "other"


def json_equal(a: Any, b: Any) -> bool:
    """JSON's equality: ``true`` is not ``1``, ``1`` is ``1.0``, objects by members."""
    kind = _json_kind(a)
    if kind != _json_kind(b) or kind == "other":
        return False
    if kind == "object":
        return bool(a.keys() == b.keys()) and all(json_equal(a[k], b[k]) for k in a)
    if kind == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def errors(schema: dict[str, Any], value: Any, path: tuple[str | int, ...] = ()) -> Iterator[ShapeError]:
    """Every violation of ``schema`` by ``value`` (an empty iteration: valid)."""
    expected = schema.get("type")
    if expected is not None and not _TYPES[expected](value):
        yield ShapeError(path, f"{_short(value)} is not of type {expected!r}")
        return
    if "const" in schema and not json_equal(schema["const"], value):
        yield ShapeError(path, f"{schema['const']!r} was expected")
    if "enum" in schema and not any(json_equal(option, value) for option in schema["enum"]):
        yield ShapeError(path, f"{_short(value)} is not one of {schema['enum']!r}")
    if isinstance(value, str):
        yield from _string(schema, value, path)
    elif _is_number(value):
        yield from _number(schema, value, path)
    elif isinstance(value, list):
        yield from _array(schema, value, path)
    elif isinstance(value, dict):
        yield from _object(schema, value, path)
    if "anyOf" in schema and not any(_valid(sub, value) for sub in schema["anyOf"]):
        yield ShapeError(path, f"{_short(value)} is not valid under any of the given schemas")


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return next(errors(schema, value), None) is None


def _string(schema: dict[str, Any], value: str, path: tuple[str | int, ...]) -> Iterator[ShapeError]:
    if "minLength" in schema and len(value) < schema["minLength"]:
        yield ShapeError(path, f"{_short(value)} is too short")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        yield ShapeError(path, f"{_short(value)} is too long")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        yield ShapeError(path, f"{_short(value)} does not match {schema['pattern']!r}")


def _number(schema: dict[str, Any], value: Any, path: tuple[str | int, ...]) -> Iterator[ShapeError]:
    if isinstance(value, float) and not math.isfinite(value):
        yield ShapeError(path, f"{value!r} is not a finite number")
        return
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        yield ShapeError(path, f"{value!r} is less than or equal to the minimum of {schema['exclusiveMinimum']!r}")
    if "maximum" in schema and value > schema["maximum"]:
        yield ShapeError(path, f"{value!r} is greater than the maximum of {schema['maximum']!r}")


def _array(schema: dict[str, Any], value: list[Any], path: tuple[str | int, ...]) -> Iterator[ShapeError]:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        yield ShapeError(path, f"the array has more than {schema['maxItems']} items")
    if schema.get("uniqueItems") and any(json_equal(value[i], value[j])
                                         for i in range(len(value)) for j in range(i + 1, len(value))):
        yield ShapeError(path, "the array has non-unique elements")
    if "items" in schema:
        for index, item in enumerate(value):
            yield from errors(schema["items"], item, (*path, index))


def _object(schema: dict[str, Any], value: dict[str, Any], path: tuple[str | int, ...]) -> Iterator[ShapeError]:
    properties: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            yield ShapeError(path, f"{name!r} is a required property")
    if schema.get("additionalProperties") is False:
        extra = sorted(str(k) for k in value if k not in properties)
        if extra:
            yield ShapeError(path, f"additional properties are not allowed ({', '.join(map(repr, extra))})")
    for name, sub in properties.items():
        if name in value:
            yield from errors(sub, value[name], (*path, name))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

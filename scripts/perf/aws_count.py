"""AWS calls by operation and DynamoDB capacity units, counted with botocore hooks.

Every client created while ``AwsCounter.installed()`` is active gets two hooks
(``before-parameter-build`` and ``after-call``, botocore's own event system). For DynamoDB
writes the hook reads the item before and after the call through a separate,
uncounted client, so units come from real item sizes, computed by AWS's
published rules (``item_size``):

- write units: ceil(size / 1 KB) of the larger of the item before and after a
  Put/Update/Delete (at least 1); a write whose condition failed costs the
  existing item's units (1 when absent); inside ``TransactWriteItems`` each
  action costs twice;
- each global secondary index the item is in (its key attributes present) is
  written too: ceil(projected size / 1 KB); an index key that changes costs a
  delete and a put; an item that enters or leaves the index costs one;
- read units: ceil(size / 4 KB) per strongly consistent GetItem (half when
  eventually consistent; at least that for an item not found); a Query costs the
  total size of the items it reads (not of those returned after a filter), / 4 KB.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import botocore.session

WRITES = ("PutItem", "UpdateItem", "DeleteItem")

UNITS_RULE = (
    "write units = ceil(size / 1 KB) of the larger of the item before and after each Put/Update/Delete (at least "
    "1; a failed condition costs the existing item's units), twice inside TransactWriteItems; every global "
    "secondary index the item is in adds ceil(projected size / 1 KB) (a changed index key: a delete and a put); "
    "read units = ceil(size / 4 KB) per strongly consistent GetItem (half when eventually consistent), a Query "
    "the total size of the items it reads / 4 KB; sizes by DynamoDB's item-size rules, read back from the table.")


def _value_size(value: dict[str, Any]) -> int:
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = str(Decimal(inner).normalize()).replace("-", "").replace(".", "").lstrip("0") or "0"
        return math.ceil(len(digits.split("E")[0]) / 2) + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(_value_size({"N": n}) for n in inner)
    if kind == "BS":
        return sum(len(b) for b in inner)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in inner.items())
    raise ValueError(kind)


def item_size(item: dict[str, Any] | None) -> int:
    """Bytes DynamoDB bills for ``item`` (attribute names + values, low-level format)."""
    if not item:
        return 0
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return units if consistent else units / 2


@dataclass
class Index:
    name: str
    keys: tuple[str, ...]
    projection: str  # ALL | KEYS_ONLY | INCLUDE
    include: tuple[str, ...] = ()

    def entry(self, item: dict[str, Any] | None, table_keys: tuple[str, ...]) -> dict[str, Any] | None:
        if not item or any(k not in item for k in self.keys):
            return None
        if self.projection == "ALL":
            return item
        keep = set(self.keys) | set(table_keys) | set(self.include)
        return {k: v for k, v in item.items() if k in keep}


@dataclass
class TableShape:
    keys: tuple[str, ...]
    indexes: list[Index]


@dataclass
class Figures:
    calls: Counter = field(default_factory=Counter)  # "dynamodb.PutItem" -> n
    write_units: float = 0
    index_write_units: float = 0
    read_units: float = 0
    # "conversa UpdateItem" -> [writes, table units, index units]: where the writes go
    by_item: dict[str, list[float]] = field(default_factory=dict)
    by_index: Counter = field(default_factory=Counter)  # index name -> write units

    @property
    def total_write_units(self) -> float:
        return self.write_units + self.index_write_units

    def total_calls(self) -> int:
        return sum(self.calls.values())

    def note_write(self, item: str, table_units: float, index_units: float) -> None:
        row = self.by_item.setdefault(item, [0, 0.0, 0.0])
        row[0] += 1
        row[1] += table_units
        row[2] += index_units


def _item_type(key: dict[str, Any]) -> str:
    """The item's kind from its key: the ledger's ``pk`` prefix (``conversa``,
    ``contador``…), the audit chain's own table, Lab 87's key shape."""
    first = next(iter(key.values()))
    text = next(iter(first.values()))
    return str(text).split("#", 1)[0] if "#" in str(text) and not str(text)[0].isdigit() else "item"


class AwsCounter:
    """Counts every call of the clients created while installed (thread-safe)."""

    def __init__(self, endpoint_url: str, region: str) -> None:
        self._lock = threading.Lock()
        self._figures = Figures()
        self._shapes: dict[str, TableShape] = {}
        self._endpoint, self._region = endpoint_url, region
        self._probe: Any = None  # the uncounted client that reads items before/after a write
        # per thread: (operation, params, the items a write touches as they were before it)
        self._pending: dict[int, tuple[str, dict[str, Any], list[Any] | None]] = {}

    # -- installing the hooks --------------------------------------------------------
    @contextmanager
    def installed(self) -> Iterator[AwsCounter]:
        original = botocore.session.Session.create_client
        counter = self
        self._probe_client()  # created before the hooks exist: its reads are never counted

        def create_client(session: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            client.meta.events.register("before-parameter-build", counter._before)
            client.meta.events.register("after-call", counter._after)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        try:
            yield self
        finally:
            botocore.session.Session.create_client = original  # type: ignore[method-assign]

    @contextmanager
    def measuring(self) -> Iterator[Figures]:
        """The figures of the calls made while the block runs."""
        with self._lock:
            self._figures = Figures()
        result = Figures()
        try:
            yield result
        finally:
            with self._lock:
                got, self._figures = self._figures, Figures()  # detached: later calls do not land in it
            result.calls, result.write_units = got.calls, got.write_units
            result.index_write_units, result.read_units = got.index_write_units, got.read_units
            result.by_item, result.by_index = got.by_item, got.by_index

    def note(self, call: str) -> None:
        """A call made without botocore (the local invoker's in-process lambda.Invoke)."""
        with self._lock:
            self._figures.calls[call] += 1

    # -- the uncounted probe ------------------------------------------------------------
    def _probe_client(self) -> Any:
        if self._probe is None:
            import boto3

            self._probe = boto3.session.Session().client(
                "dynamodb", endpoint_url=self._endpoint, region_name=self._region,
                aws_access_key_id="testing", aws_secret_access_key="testing")
        return self._probe

    def _shape(self, table: str) -> TableShape:
        if table not in self._shapes:
            desc = self._probe_client().describe_table(TableName=table)["Table"]
            keys = tuple(k["AttributeName"] for k in desc["KeySchema"])
            indexes = [Index(g["IndexName"], tuple(k["AttributeName"] for k in g["KeySchema"]),
                             g["Projection"]["ProjectionType"], tuple(g["Projection"].get("NonKeyAttributes", ())))
                       for g in desc.get("GlobalSecondaryIndexes", [])]
            self._shapes[table] = TableShape(keys, indexes)
        return self._shapes[table]

    def _item(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        return self._probe_client().get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

    def _key_of(self, table: str, params: dict[str, Any]) -> dict[str, Any]:
        if "Key" in params:
            return params["Key"]
        shape = self._shape(table)
        return {k: params["Item"][k] for k in shape.keys}

    # -- hooks ------------------------------------------------------------------------
    def _targets(self, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], int, str]]:
        """(table, key, multiplier, label) of each item a write touches."""
        if operation in WRITES:
            key = self._key_of(params["TableName"], params)
            return [(params["TableName"], key, 1, f"{_item_type(key)} {operation}")]
        if operation == "TransactWriteItems":
            out = []
            for action in params["TransactItems"]:
                (kind, body), = action.items()
                key = self._key_of(body["TableName"], body)
                out.append((body["TableName"], key, 2, f"{_item_type(key)} {kind} (transaction)"))
            return out
        return []

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        operation = model.name
        service = model.service_model.service_name
        with self._lock:
            self._figures.calls[f"{service}.{operation}"] += 1
        if service != "dynamodb":
            return
        targets = self._targets(operation, params)
        before = [(t, k, m, label, self._item(t, k)) for t, k, m, label in targets] if targets else None
        self._pending[threading.get_ident()] = (operation, params, before)

    def _after(self, model: Any, parsed: dict[str, Any], http_response: Any, **_: Any) -> None:
        if model.service_model.service_name != "dynamodb":
            return
        operation, params, before = self._pending.pop(threading.get_ident(), (model.name, {}, None))
        failed = http_response.status_code >= 300
        if before is not None:
            self._count_writes(before, failed)
        elif operation == "GetItem":
            self._count_get(parsed, params)
        elif operation == "Query":
            self._count_query(parsed, params)

    def _count_writes(self, before: list[Any], failed: bool) -> None:
        for table, key, multiplier, label, old in before:
            new = old if failed else self._item(table, key)
            index_units = 0.0
            if failed:  # the condition (or the transaction) failed: the existing item's units, no index write
                table_units = multiplier * write_units(item_size(old))
                label += " (condition failed)"
            else:
                table_units = multiplier * write_units(max(item_size(old), item_size(new)))
                shape = self._shape(table)
                for index in shape.indexes:
                    units = multiplier * self._index_writes(index, shape.keys, old, new)
                    index_units += units
                    if units:
                        with self._lock:
                            self._figures.by_index[index.name] += units
            with self._lock:
                self._figures.write_units += table_units
                self._figures.index_write_units += index_units
                self._figures.note_write(f"{table}: {label}", table_units, index_units)

    @staticmethod
    def _index_writes(index: Index, table_keys: tuple[str, ...], old: Any, new: Any) -> float:
        before, after = index.entry(old, table_keys), index.entry(new, table_keys)
        if before is None and after is None:
            return 0
        if before is None:
            return write_units(item_size(after))
        if after is None:
            return write_units(item_size(before))
        if before == after:
            return 0
        if any(before.get(k) != after.get(k) for k in index.keys):  # the index key moved: delete + put
            return write_units(item_size(before)) + write_units(item_size(after))
        return write_units(max(item_size(before), item_size(after)))

    def _count_get(self, parsed: dict[str, Any], params: dict[str, Any]) -> None:
        units = read_units(item_size(parsed.get("Item")), bool(params.get("ConsistentRead")))
        with self._lock:
            self._figures.read_units += units

    def _count_query(self, parsed: dict[str, Any], params: dict[str, Any]) -> None:
        items = parsed.get("Items")
        if items is None or "ProjectionExpression" in params:
            # Select=COUNT or a projection: the whole items were read all the same.
            full = {k: v for k, v in params.items() if k not in ("Select", "ProjectionExpression")}
            if "ProjectionExpression" in params and "#" not in str(params.get("KeyConditionExpression")):
                full.pop("ExpressionAttributeNames", None)
            items = self._probe_client().query(**full).get("Items", [])
        size = sum(item_size(i) for i in items)
        with self._lock:
            self._figures.read_units += read_units(size, bool(params.get("ConsistentRead")))

"""The ledger's one DynamoDB table: its keys, its serialization, its conditions, its definition.

Every key prefix and key shape is built by exactly ONE function below; the item-kind
modules (``claims``, ``attempts``, ``conversations``, ``inbound``, ``audit``) and
``cadencia_shared.approvals`` call them and never spell a prefix themselves. The
strings are stored data (DESIGN.md §6): Lab 87's Portuguese names stay, and
``tests/test_ledger_item_shapes.py`` pins every one of them.

Identifiers may not contain ``#`` (``checked_id``; the models at the edges enforce
the id patterns of ``cadencia_shared.models``), so no two different tuples can
produce the same key.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, cast

from botocore.exceptions import ClientError

from ..dynamo_types import DynamoClient, deserialize_item, failed_condition_item, serialize_item

TABLE_KEY = "pk"
# One conversation's history in time order. Projects only the keys and ``tipo``
# (which never changes once written): an update that moves no index key — an
# attempt's ``resultado``, a claim's settlement, an approval's decision — then
# writes nothing to this index (with ALL it rewrote the entry every time). The
# readers (operators, the harness) fetch the items by key (``history``).
GSI_BY_CONVERSATION = "historicoPorConversa"
GSI_BY_CONVERSATION_INCLUDES = ("tipo",)
# Its predecessor (projection ALL), retired: see ``RETIRED_INDEXES``.
LEGACY_GSI_BY_CONVERSATION = "porConversa"
GSI_PARTITION = "conversaId"
GSI_SORT = "registradoEm"
# Sparse GSI of refund claims not yet settled with the gateway: only those items
# carry ``pendencia``, so the reconciler reads its work list without a scan.
# KEYS_ONLY: no reader needs more than the keys from it (``LedgerTable.pending``
# reads each item by key), so a claim update that moves neither ``pendencia`` nor
# ``visitadoEm`` writes nothing to it, and a conversation handed to a person enters
# it with its keys, not its whole compressed history. (INCLUDE needs at least one
# non-key attribute; KEYS_ONLY is the INCLUDE of none.)
GSI_UNSETTLED = "pendenciasPorVisita"
GSI_UNSETTLED_PROJECTION = "KEYS_ONLY"
# Its predecessor (projection ALL), retired: see ``RETIRED_INDEXES``.
LEGACY_GSI_UNSETTLED = "reembolsosPendentes"
GSI_UNSETTLED_PARTITION = "pendencia"
# The unsettled index's sort key: when the claim was last written by a visit (its
# creation, a retake, an unknown outcome). Oldest visit first, so a claim the
# gateway keeps unknown goes to the back after each visit and can never starve the
# claims behind it. ``registradoEm`` keeps its meaning (creation, the history index).
GSI_UNSETTLED_SORT = "visitadoEm"
UNSETTLED_MARK = "reembolso"
# Approval requests awaiting a decision share that sparse index under their own
# partition value: operators list them with a Query, never a Scan.
APPROVAL_PENDING_MARK = "aprovacao"
# ... and approved ones not yet consumed: the expiry sweep finds one whose resume was lost.
APPROVAL_APPROVED_MARK = "aprovacao_aprovada"
# ... and conversations waiting for a person (aguardando_humano), for scripts/atendente.py.
HUMAN_PENDING_MARK = "humano"
# Indexes replaced by a narrower successor, each with its (partition, sort) keys;
# they projected ALL. CloudFormation changes no existing GSI's projection and creates
# or deletes at most one GSI per update, so a stack that still has one keeps it for
# the deploy that creates its successor (``-c keepRetiredIndexes=<name>,...``), then
# a deploy without it drops it (docs/infrastructure.md, *Migrating the ledger's indexes*).
RETIRED_INDEXES: dict[str, tuple[str, str]] = {
    LEGACY_GSI_BY_CONVERSATION: (GSI_PARTITION, GSI_SORT),
    LEGACY_GSI_UNSETTLED: (GSI_UNSETTLED_PARTITION, GSI_UNSETTLED_SORT),
}
TTL_ATTRIBUTE = "expiraEm"
ITEM_TYPE_ATTRIBUTE = "tipo"

BATCH_GET_MAX = 100  # DynamoDB's limit of keys per BatchGetItem


class ItemType(StrEnum):
    """The ``tipo`` attribute: which kind of item a row is (stored names)."""

    CLAIM = "reivindicacao"
    COUNTER = "contador_tentativas"
    CONVERSATION = "conversa"
    AUDIT = "auditoria"
    APPROVAL = "aprovacao"
    DECISION = "decisao"
    FIRST_REFUND = "primeiro_reembolso"
    SESSION = "sessao"
    SWITCH = "interruptor"


class LedgerError(Exception):
    pass


# --- keys: each prefix and shape in one function ----------------------------------


def checked_id(value: str) -> str:
    """An identifier as a key part: non-empty and without the ``#`` separator."""
    if not value or "#" in value:
        raise ValueError(f"identifier not allowed in a ledger key: {value!r}")
    return value


def refund_idempotency_key(conversation_id: str, order_id: str) -> str:
    """Lab 87's key ``{conversaId}#{pedidoId}#reembolso``: one refund per (conversation, order)."""
    return f"{checked_id(conversation_id)}#{checked_id(order_id)}#reembolso"


def approval_id(conversation_id: str, tool: str, version: str, arguments_sha256: str,
                attempt_number: int | None = None) -> str:
    """One approval request per (conversation, tool, tool version, canonical
    arguments) and the retry ceiling's number of the call that asked: any other
    conversation, amount or version is a different record, and a fresh request for
    the same call (after one was voided or expired: a new call, a new number) is a
    new identity — its decision, its resumed tool_use block and its customer message
    never collide with the old one's. The number in the key binds it: an edited
    ``tentativaNumero`` no longer matches the record's id. Short enough to type."""
    material = "\x00".join((checked_id(conversation_id), checked_id(tool), checked_id(version),
                            checked_id(arguments_sha256)))
    base = hashlib.sha256(material.encode()).hexdigest()[:32]
    return base if attempt_number is None else f"{base}-{attempt_number}"


def approval_pk(approval: str) -> str:
    return f"aprovacao#{checked_id(approval)}"


def decision_pk(approval: str, *, first: bool = False) -> str:
    """A person's decision on an approval request (``cadencia_shared.approval_decisions``);
    ``first``: the first of two people's approval, before the second decides."""
    return f"decisao#{checked_id(approval)}" + ("#primeira" if first else "")


def claim_pk(idempotency_key: str) -> str:
    # The idempotency key holds ``#`` by design (refund_idempotency_key checked its parts).
    return f"reivindicacao#{idempotency_key}"


def first_refund_pk(order_id: str) -> str:
    return f"primeiro-reembolso#{checked_id(order_id)}"


def _attempt_series(conversation_id: str, subject: str, tool: str) -> str:
    return f"{checked_id(conversation_id)}#{checked_id(subject)}#{checked_id(tool)}"


def counter_pk(conversation_id: str, subject: str, tool: str) -> str:
    return f"contador#{_attempt_series(conversation_id, subject, tool)}"


def counter_history_sort(first_recorded_at: str, subject: str, tool: str) -> str:
    """A counter's place in its conversation's history: its first attempt (set once)."""
    return history_sort(first_recorded_at, ItemType.COUNTER, f"{checked_id(subject)}#{checked_id(tool)}")


def conversation_pk(conversation_id: str) -> str:
    return f"conversa#{checked_id(conversation_id)}"


def conversation_id_of(pk: str) -> str:
    """The inverse of ``conversation_pk`` (items read back from an index)."""
    return pk.removeprefix("conversa#")


def audit_pk(event_id: str) -> str:
    return f"auditoria#{checked_id(event_id)}"


def history_sort(at: str, item_type: ItemType, suffix: str) -> str:
    """``registradoEm`` of an item in the conversation's history: time first (the
    order operators read), then the kind and a unique suffix (no two items tie)."""
    return f"{at}#{item_type.value}#{suffix}"


# --- serialization, conditions, time: the table's one client ----------------------------


def serialize(values: dict[str, Any]) -> dict[str, Any]:
    """Python values → DynamoDB typed JSON; ``None`` means "no attribute" (sparse items)."""
    return serialize_item({k: v for k, v in values.items() if v is not None})


# One encoder, not one per call: ``json.dumps`` with options builds a JSONEncoder each
# time, which costs more than encoding a typical message (scripts/perf/history_encoding.py).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def compact_json(value: Any) -> bytes:
    """The UTF-8 JSON that ``compressed_json`` compresses (and orchestrator.history
    measures against the item's bound): one encoding, defined once."""
    return _COMPACT.encode(value).encode()


def compressed_json(value: Any, *, encoded: bytes | None = None) -> bytes:
    """A JSON value as a binary attribute, zlib-compressed: the conversation item's
    history and kept replies (every KB of that item is a write unit on each lease and
    commit, and a days-long conversation must stay well inside the 400 KB item).
    ``encoded``: ``compact_json(value)``, when the caller has it already."""
    return zlib.compress(compact_json(value) if encoded is None else encoded)


def from_compressed_json(blob: bytes | None, empty: Any) -> Any:
    """``compressed_json``'s value back (``empty`` when the attribute is absent)."""
    return empty if not blob else json.loads(zlib.decompress(blob))


def condition_failed(err: ClientError) -> bool:
    """A single write's condition failed, or (a transaction) one of its items' did."""
    if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
        return True
    return "ConditionalCheckFailed" in [r.get("Code") for r in err.response.get("CancellationReasons", [])]


def old_item(err: ClientError) -> dict[str, Any] | None:
    """The item a failed condition saw (``ReturnValuesOnConditionCheckFailure=ALL_OLD``)."""
    item = failed_condition_item(err)
    return deserialize_item(item) if item else None


class LedgerTable:
    """The table name, the (botocore) DynamoDB client and the clock every item kind shares."""

    def __init__(self, table_name: str, client: DynamoClient | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        if client is None:
            from botocore.session import get_session

            # The one place a botocore client becomes a DynamoClient (it has no static type).
            client = cast("DynamoClient", get_session().create_client("dynamodb"))
        self.name = table_name
        self.client: DynamoClient = client
        self.clock = clock

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def iso(self, ms: int | None = None) -> str:
        """A UTC timestamp with milliseconds and ``Z`` (sorts as text)."""
        ms = self.now_ms() if ms is None else ms
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    @staticmethod
    def key(pk: str) -> dict[str, Any]:
        return {TABLE_KEY: {"S": pk}}

    def get(self, pk: str) -> dict[str, Any] | None:
        resp = self.client.get_item(TableName=self.name, Key=self.key(pk), ConsistentRead=True)
        return deserialize_item(resp["Item"]) if "Item" in resp else None

    def get_fields(self, pk: str, *names: str) -> dict[str, Any]:
        """A few attributes of one item (never, say, a conversation's large history)."""
        resp = self.client.get_item(
            TableName=self.name, Key=self.key(pk), ConsistentRead=True,
            ProjectionExpression=", ".join(f"#a{i}" for i in range(len(names))),
            ExpressionAttributeNames={f"#a{i}": name for i, name in enumerate(names)},
        )
        return deserialize_item(resp["Item"]) if "Item" in resp else {}

    def get_many(self, pks: list[str]) -> dict[str, dict[str, Any]]:
        """Items by key, strongly consistent (BatchGetItem, 100 keys a request; keys
        DynamoDB leaves unprocessed are asked again). Missing items are absent."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(pks), BATCH_GET_MAX):
            request: dict[str, Any] = {self.name: {"Keys": [self.key(pk) for pk in pks[start:start + BATCH_GET_MAX]],
                                                   "ConsistentRead": True}}
            while request:
                resp = self.client.batch_get_item(RequestItems=request)
                for item in resp.get("Responses", {}).get(self.name, []):
                    decoded = deserialize_item(item)
                    found[decoded[TABLE_KEY]] = decoded
                request = resp.get("UnprocessedKeys") or {}
        return found

    def put_new(self, item: dict[str, Any]) -> None:
        """Write an item that must not exist yet (append-only records)."""
        self.client.put_item(TableName=self.name, Item=serialize(item), ConditionExpression="attribute_not_exists(pk)")

    def pending_entries(self, mark: str, *, limit: int) -> Iterator[dict[str, Any]]:
        """The sparse index's entries under ``mark`` (unsettled claims, pending approvals,
        conversations waiting for a person), least recently visited first: the keys
        only (``pk``, ``pendencia``, ``visitadoEm``), as the index may lag the table."""
        return self.query_index(GSI_UNSETTLED, GSI_UNSETTLED_PARTITION, mark, limit=limit)

    def pending(self, mark: str, *, limit: int) -> Iterator[dict[str, Any]]:
        """The whole items waiting under ``mark``, in the index's order, each read by
        key (strongly consistent GetItem: the readers' roles hold GetItem on the table,
        and BatchGetItem would be a new grant and a new VPC-endpoint action). An item
        that no longer carries ``mark`` (settled, decided or taken back since the index
        was written) is skipped, so a reader never acts on a stale copy."""
        for entry in self.pending_entries(mark, limit=limit):
            item = self.get(entry[TABLE_KEY])
            if item is not None and item.get(GSI_UNSETTLED_PARTITION) == mark:
                yield item

    def query_index(self, index: str, partition_name: str, partition_value: str, *, limit: int | None = None,
                    item_type: ItemType | None = None) -> Iterator[dict[str, Any]]:
        """Items of one index partition in sort-key order (oldest first), following
        pages; at most ``limit`` of them; only those of ``item_type`` when given."""
        values = {":part": partition_value}
        kwargs: dict[str, Any] = {
            "TableName": self.name, "IndexName": index, "KeyConditionExpression": "#part = :part",
            "ExpressionAttributeNames": {"#part": partition_name}, "ScanIndexForward": True,
        }
        if item_type is not None:
            kwargs["FilterExpression"] = f"{ITEM_TYPE_ATTRIBUTE} = :type"
            values[":type"] = item_type.value
        kwargs["ExpressionAttributeValues"] = serialize(values)
        remaining = limit
        while remaining is None or remaining > 0:
            resp = self.client.query(**kwargs, **({} if remaining is None else {"Limit": remaining}))
            items = resp.get("Items", [])
            yield from (deserialize_item(item) for item in items)
            remaining = None if remaining is None else remaining - len(items)
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def require_retired_indexes(names: Collection[str]) -> None:
    """Refuse (ValueError) any of ``names`` that is not in ``RETIRED_INDEXES``: a typo
    in a deploy's list of indexes to keep would otherwise drop the index it meant to keep."""
    unknown = set(names) - set(RETIRED_INDEXES)
    if unknown:
        raise ValueError(f"not a retired ledger index: {sorted(unknown)} (retired: {sorted(RETIRED_INDEXES)})")


def table_definition(table_name: str, *, retired_indexes: Collection[str] = ()) -> dict[str, Any]:
    """CreateTable arguments (local stack, tests); the CDK stack mirrors them.
    ``retired_indexes``: names of ``RETIRED_INDEXES`` kept beside their successors
    (a migrating stack)."""
    require_retired_indexes(retired_indexes)
    retired = [_index(name, *keys) for name, keys in RETIRED_INDEXES.items() if name in retired_indexes]
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"}
            for name in (TABLE_KEY, GSI_PARTITION, GSI_SORT, GSI_UNSETTLED_PARTITION, GSI_UNSETTLED_SORT)
        ],
        "KeySchema": [{"AttributeName": TABLE_KEY, "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [
            *retired,
            _index(GSI_BY_CONVERSATION, GSI_PARTITION, GSI_SORT, include=GSI_BY_CONVERSATION_INCLUDES),
            _index(GSI_UNSETTLED, GSI_UNSETTLED_PARTITION, GSI_UNSETTLED_SORT,
                   projection_type=GSI_UNSETTLED_PROJECTION),
        ],
    }


def _index(name: str, partition: str, sort: str, *, include: tuple[str, ...] = (),
           projection_type: str = "ALL") -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": projection_type}
    if include:
        projection = {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(include)}
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": partition, "KeyType": "HASH"},
                      {"AttributeName": sort, "KeyType": "RANGE"}],
        "Projection": projection,
    }

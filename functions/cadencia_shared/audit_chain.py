"""The tamper-evident audit trail: its own DynamoDB table, one hash chain per
conversation.

Table ``cadencia-agente-auditoria``: partition key ``cadeia`` (the conversation id,
or ``-`` for records of no conversation), sort key ``seq`` (1, 2, 3, ...). Each
record carries ``hashAnterior`` (the previous record's ``hash``; 64 zeros for the
first) and ``hash`` = SHA-256 of the record's canonical JSON (``cadeia``, ``seq``,
``evento``, ``registradoEm``, ``detalhes``, ``hashAnterior``). A record is appended
with ``PutItem`` conditioned on ``attribute_not_exists(seq)``: two writers that
read the same last record race for the same ``seq`` and exactly one wins; the
other re-reads and links after it, so the chain never forks. Writers need only
``PutItem`` and ``Query`` (to read the last link), never ``UpdateItem`` or
``DeleteItem`` (infra/contract.py).

``verify`` walks a chain and reports the first broken link: a gap in ``seq`` (a
deleted record), a ``hashAnterior`` that is not the previous hash (a record
removed and the rest renumbered, or reordered), or a ``hash`` that does not match
the content (an edited record).

Deleting the *last* records leaves a shorter chain that is valid on its own, so
the chain's head is anchored outside the audit table: after each append the
writer records (``seqCabeca``, ``hashCabeca``) on the item ``auditoria-cabeca#{chain}``
of the LEDGER table (an ``UpdateItem`` conditioned on the anchor being the previous
link, or a lagging link still in the chain: it only moves forward along the chain,
so a deleted tail re-appended by the writers stays reported). ``verify`` then reports
``cauda_truncada`` when the chain ends before the anchored head, and
``ancora_divergente`` when the record at the anchored ``seq`` is not the anchored
one (a tail deleted and rewritten). The anchor is written after the record: a
writer killed in between leaves it behind (never ahead); ``verify`` accepts that,
and ``check`` counts the links after every anchor (``unanchored``), which the
verifier flags — a crash, or a link put by someone who moves no anchor.
Threat model (docs/audit.md): detected — a record deleted, edited or
reordered, a tail deleted or rewritten, a link appended without moving an anchor;
NOT detected — an identity with a writer's grants (PutItem here AND UpdateItem on
``auditoria-cabeca#``: every writer role) appending as a writer does, or one that
can rewrite both tables (PITR and CloudTrail data events are the evidence then).

A conversation's chain has a second anchor, on the conversation's own item
(``cadencia_shared.audit_anchors``): the orchestrator's turn sets it in the fenced
commit it already writes (``head_for_commit``/``anchored_by_commit``), so the turn
moves no ``auditoria-cabeca#`` item; ``verify`` checks both.

Inside ``one_anchor()`` (the orchestrator wraps each turn in it) the anchor is moved
once, after the block's last link, from where it stood before the block's first — or
not at all when the turn's commit took that head (``head_for_commit``): a turn's k
links cost k PutItems and at most one anchor UpdateItem instead of k. The price is
the window: until the block ends (a turn: seconds), or forever if its process is
killed inside it, the anchor lags by the block's links — the state a kill between
record and anchor already leaves, which ``verify`` accepts; a tail deleted inside
that window and re-appended over is not caught by the anchor (a gap still is).

A writer remembers the last link it appended to each chain for ``HEAD_MEMORY_S``
and links the next one after it without reading (a turn's several links cost one
Query, not one each). A remembered head is only a guess: the put's condition is
what decides — if another writer took that ``seq`` meanwhile, the put fails, the
writer forgets the head and reads the chain's last link, as without a memory.
Records are never updated, so a link the writer itself appended is still the
record at its ``seq`` (or the chain was tampered with, which ``verify`` reports).

Personal data never enters a record in clear: values under keys that name contact
data (CPF, phone, e-mail, address, at any depth) are MASKED — all but their last two
characters starred (``cadencia_shared.masking``) — not hashed: the trail proves
decisions and needs no match between records, an unkeyed hash of a phone or CPF is
reversible by enumeration, and a keyed HMAC would put a secret on every writer's path
for a capability nobody uses (docs/audit.md). Conversation ids are not personal
here (the channel names them ``wa-{clienteId}-{day}``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .audit_anchors import (ANCHOR_PREFIX, GENESIS, LEDGER_KEY, ChainReport, Head, LedgerAnchors, anchor_problem,
                            unanchored_links)
from .dynamo_types import deserialize_item, serialize_item
from .masking import mask_identifier

AUDIT_TABLE = "cadencia-agente-auditoria"
CHAIN_KEY, SEQ_KEY = "cadeia", "seq"
NO_CONVERSATION = "-"
MAX_APPEND_ATTEMPTS = 20
# How long a writer trusts the head it appended last (about one turn): beyond it,
# other writers (tools, another orchestrator instance) have likely moved the chain,
# and a failed conditional put costs a write where a read costs half a read unit.
HEAD_MEMORY_S = 60.0
HEAD_MEMORY_CHAINS = 256  # chains remembered at most (bounded memory in a warm container)
PERSONAL_KEYS = frozenset({"cpf", "telefone", "celular", "email", "e-mail", "endereco", "cep", "phone", "address"})


def mask(value: Any) -> Any:
    """Contact data masked, anywhere in the details (nested dicts and lists)."""
    if isinstance(value, dict):
        return {k: (_masked(v) if str(k).lower() in PERSONAL_KEYS else mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def _masked(value: Any) -> Any:
    """Every leaf of a personal value starred but its last two characters
    (booleans and nulls say nothing about the person and stay)."""
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    return mask_identifier(str(value), keep=2)


def record_hash(record: dict[str, Any]) -> str:
    body = {k: record[k] for k in (CHAIN_KEY, SEQ_KEY, "evento", "registradoEm", "detalhes", "hashAnterior")}
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Broken:
    chain: str
    seq: int  # the first record whose link is broken
    problem: str  # "faltando" | "elo_quebrado" | "conteudo_alterado" | "cauda_truncada" | "ancora_divergente"


class ChainContention(Exception):
    """Too many concurrent appends won the same positions in a row."""


class AuditChain:
    def __init__(self, table_name: str, client: Any, *, clock: Callable[[], float] = time.time,
                 anchor_table: str | None = None) -> None:
        """``anchor_table``: the ledger table, where each chain's head is anchored
        (None: no anchor; a truncated tail is then undetectable)."""
        self.table_name = table_name
        self.client = client
        self._clock = clock
        self.anchor_table = anchor_table
        self._anchors = None if anchor_table is None else LedgerAnchors(client, anchor_table)
        self._appended: dict[str, tuple[dict[str, Any], float]] = {}  # chain -> (last link appended, when)
        # Per thread: a writer shared by threads (tests, the local runner) defers only
        # the links of the thread inside ``one_anchor``.
        self._deferral = threading.local()

    @contextmanager
    def one_anchor(self) -> Iterator[None]:
        """Anchor each chain appended to inside the block once, after its last link
        (module doc). Nested blocks anchor at the outermost's end. A block left by an
        exception still anchors; an anchor failure then does not mask the exception
        (the anchor only lags, which ``verify`` accepts and the next append repairs)."""
        if getattr(self._deferral, "heads", None) is not None:
            yield
            return
        self._deferral.heads = {}
        try:
            yield
        except BaseException:
            self._anchor_deferred(quiet=True)
            raise
        self._anchor_deferred(quiet=False)

    def _anchor_deferred(self, *, quiet: bool) -> None:
        heads: dict[str, tuple[Head, Head]] = self._deferral.heads
        self._deferral.heads = None
        for chain, (head, before) in heads.items():
            try:
                self._anchor(chain, head, before)
            except (ClientError, BotoCoreError):
                if not quiet:
                    raise

    def _anchor_or_defer(self, chain: str, record: dict[str, Any]) -> None:
        head = Head(record[SEQ_KEY], record["hash"])
        before = Head(head.seq - 1, record["hashAnterior"])  # where the anchor should stand now
        heads = getattr(self._deferral, "heads", None)
        if heads is None:
            self._anchor(chain, head, before)
        else:  # keep the block's first "before": the anchor moves from there in one step
            heads[chain] = (head, heads[chain][1] if chain in heads else before)

    def append(self, *, conversation_id: str | None, event: str, details: dict[str, Any]) -> int:
        """Append one record at the end of the conversation's chain; its ``seq``."""
        chain = conversation_id or NO_CONVERSATION
        stored_details = json.dumps(mask(details), ensure_ascii=False, sort_keys=True, default=str)
        last = self._remembered(chain)
        for _ in range(MAX_APPEND_ATTEMPTS):
            last = last if last is not None else self._last(chain)
            record = {CHAIN_KEY: chain, SEQ_KEY: (last[SEQ_KEY] + 1) if last else 1, "evento": event,
                      "registradoEm": self._now(), "detalhes": stored_details,
                      "hashAnterior": last["hash"] if last else GENESIS}
            record["hash"] = record_hash(record)
            try:
                self.client.put_item(TableName=self.table_name, Item=serialize_item(record),
                                     ConditionExpression=f"attribute_not_exists({SEQ_KEY})")
            except ClientError as err:
                if _condition_failed(err):
                    self._appended.pop(chain, None)  # another writer took this seq:
                    last = None  # read the chain's last link and link after it
                    continue
                raise
            self._remember(chain, record)
            self._anchor_or_defer(chain, record)
            return record[SEQ_KEY]
        raise ChainContention(chain)

    def _remembered(self, chain: str) -> dict[str, Any] | None:
        """The last link this writer appended to ``chain``, if recent enough to guess on."""
        link, at = self._appended.get(chain, (None, 0.0))
        return link if link is not None and self._clock() - at <= HEAD_MEMORY_S else None

    def _remember(self, chain: str, link: dict[str, Any]) -> None:
        now = self._clock()
        if len(self._appended) >= HEAD_MEMORY_CHAINS:  # a warm container sees many conversations
            self._appended = {c: (k, at) for c, (k, at) in self._appended.items() if now - at <= HEAD_MEMORY_S}
            if len(self._appended) >= HEAD_MEMORY_CHAINS:
                self._appended.clear()
        self._appended[chain] = (link, now)

    def _anchor(self, chain: str, head: Head, expected: Head) -> None:
        """Move the anchor to ``head`` only along the chain: from ``expected`` (the
        link before it, or before a ``one_anchor`` block's first link), or, when
        the anchor lags (a writer killed between record and anchor, or a later
        writer anchoring first), from an anchored record still in the chain.
        So a deleted tail that the writers re-append never moves it (a bare
        ``seqCabeca < :s`` did, two appends later): it keeps the deleted record's
        hash and ``verify`` keeps reporting ``ancora_divergente``."""
        if self.anchor_table is None:
            return
        for _ in range(MAX_APPEND_ATTEMPTS):
            current = self._move_anchor(chain, head, expected)
            if current is None or current.seq >= head.seq or not self._holds(chain, current):
                return  # moved; or a later link anchored; or the anchored record is gone
            expected = current

    def _move_anchor(self, chain: str, head: Head, expected: Head) -> Head | None:
        """None when the anchor moved from ``expected`` (or from nothing) to ``head``;
        else the anchor found."""
        try:
            self.client.update_item(
                TableName=self.anchor_table, Key={LEDGER_KEY: {"S": ANCHOR_PREFIX + chain}},
                UpdateExpression="SET seqCabeca = :s, hashCabeca = :h",
                ConditionExpression="attribute_not_exists(seqCabeca) OR (seqCabeca = :ps AND hashCabeca = :ph)",
                ExpressionAttributeValues={":s": {"N": str(head.seq)}, ":h": {"S": head.hash},
                                           ":ps": {"N": str(expected.seq)}, ":ph": {"S": expected.hash}},
                # The anchor found comes back with the refusal: no GetItem. It lags
                # more often since the orchestrator anchors in its commit instead.
                ReturnValuesOnConditionCheckFailure="ALL_OLD")
            return None
        except ClientError as err:
            if not _condition_failed(err):
                raise
            old = err.response.get("Item") or {}
        if "seqCabeca" in old and "hashCabeca" in old:
            return Head(int(old["seqCabeca"]["N"]), old["hashCabeca"]["S"])
        return self.head(chain)

    def _holds(self, chain: str, anchored: Head) -> bool:
        """The record at the anchored seq is the anchored one."""
        items = self.client.query(
            TableName=self.table_name, KeyConditionExpression="cadeia = :c AND seq = :s", ConsistentRead=True,
            ExpressionAttributeValues={":c": {"S": chain}, ":s": {"N": str(anchored.seq)}}).get("Items", [])
        return bool(items) and _decode(items[0]).get("hash") == anchored.hash

    def head(self, chain: str) -> Head | None:
        """The ``auditoria-cabeca#`` anchor of ``chain`` (None without an anchor table or record)."""
        return None if self._anchors is None else self._anchors.item_head(chain)

    def anchored_chains(self) -> list[str]:
        """Every chain with an anchor of either kind (``LedgerAnchors.anchored_chains``)."""
        return [] if self._anchors is None else self._anchors.anchored_chains()

    def records(self, chain: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"TableName": self.table_name, "KeyConditionExpression": "cadeia = :c",
                                  "ExpressionAttributeValues": {":c": {"S": chain}}, "ConsistentRead": True}
        while True:
            resp = self.client.query(**kwargs)
            for item in resp.get("Items", []):
                yield _decode(item)
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def chains(self) -> list[str]:
        """Every chain in the table (the verifier's full pass: a Scan of keys only)."""
        found: set[str] = set()
        kwargs: dict[str, Any] = {"TableName": self.table_name, "ProjectionExpression": CHAIN_KEY}
        while True:
            resp = self.client.scan(**kwargs)
            found.update(item[CHAIN_KEY]["S"] for item in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return sorted(found)
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def verify(self, chain: str) -> tuple[int, Broken | None]:
        """(records checked, the first broken link or None), against both anchors."""
        report = self.check(chain)
        return report.checked, report.broken

    def check(self, chain: str) -> ChainReport:
        """``verify``, and how many last links no anchor acknowledges (``unanchored_links``)."""
        anchors = [] if self._anchors is None else self._anchors.heads(chain)
        anchored_seqs = {anchor.seq for anchor in anchors}
        previous_hash, expected_seq, hashes_at = GENESIS, 1, {}
        for record in self.records(chain):
            problem = _link_problem(record, expected_seq, previous_hash)
            if problem is not None:
                return ChainReport(expected_seq - 1, Broken(chain, expected_seq, problem))
            if record[SEQ_KEY] in anchored_seqs:
                hashes_at[record[SEQ_KEY]] = record["hash"]
            previous_hash, expected_seq = record["hash"], expected_seq + 1
        checked = expected_seq - 1
        problem_at = anchor_problem(checked, anchors, hashes_at)
        if problem_at is not None:
            return ChainReport(checked, Broken(chain, *problem_at))
        return ChainReport(checked, None, unanchored_links(checked, anchors))

    # -- the conversation's anchor, set by the orchestrator's commit (audit_anchors) --
    def seed_head(self, chain: str, anchored: Head) -> None:
        """Guess ``anchored`` (the conversation's anchor, read with the lease) as the
        chain's last link unless this writer remembers a later one: a turn's first
        link then needs no Query when nobody appended since the last commit. Only a
        guess, decided by the put's condition as the head memory is."""
        remembered = self._remembered(chain)
        if remembered is None or remembered[SEQ_KEY] < anchored.seq:
            self._remember(chain, {SEQ_KEY: anchored.seq, "hash": anchored.hash})

    def head_for_commit(self, chain: str, anchored: Head | None) -> Head | None:
        """The head a commit may set as the conversation's anchor, moving it from
        ``anchored``: this block's last link on ``chain``, if the move is along the
        chain — the block's first link was linked right after ``anchored`` (free), or
        the anchored record is still in the chain (one Query, when another writer
        appended since). None: leave the anchor where it is (no link in the block,
        no anchor table, or the anchored record is gone or changed, which ``verify``
        must keep reporting)."""
        deferred = (getattr(self._deferral, "heads", None) or {}).get(chain)
        if deferred is None or self._anchors is None:
            return None
        head, before = deferred
        if anchored is None or before == anchored:
            return head
        if anchored.seq >= head.seq or not self._holds(chain, anchored):
            return None
        return head

    def anchored_by_commit(self, chain: str, head: Head | None) -> None:
        """The commit that set ``head`` on the conversation succeeded: the block's end
        does not also move the ``auditoria-cabeca#`` item (a link appended after the
        commit keeps the chain deferred, anchored there as before)."""
        heads = getattr(self._deferral, "heads", None)
        if head is not None and heads and chain in heads and heads[chain][0] == head:
            del heads[chain]

    def _last(self, chain: str) -> dict[str, Any] | None:
        resp = self.client.query(TableName=self.table_name, KeyConditionExpression="cadeia = :c",
                                 ExpressionAttributeValues={":c": {"S": chain}}, ScanIndexForward=False, Limit=1,
                                 ConsistentRead=True)
        items = resp.get("Items", [])
        return _decode(items[0]) if items else None

    def _now(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _link_problem(record: dict[str, Any], expected_seq: int, previous_hash: str) -> str | None:
    if record[SEQ_KEY] != expected_seq:
        return "faltando"
    if record.get("hashAnterior") != previous_hash:
        return "elo_quebrado"
    if record.get("hash") != record_hash(record):
        return "conteudo_alterado"
    return None


def _condition_failed(err: ClientError) -> bool:
    return err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _decode(item: dict[str, Any]) -> dict[str, Any]:
    record = deserialize_item(item)
    record[SEQ_KEY] = int(record[SEQ_KEY])
    return record


def table_definition(table_name: str = AUDIT_TABLE) -> dict[str, Any]:
    """CreateTable arguments (local stack, tests); the CDK stack mirrors them."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": CHAIN_KEY, "AttributeType": "S"},
                                 {"AttributeName": SEQ_KEY, "AttributeType": "N"}],
        "KeySchema": [{"AttributeName": CHAIN_KEY, "KeyType": "HASH"}, {"AttributeName": SEQ_KEY, "KeyType": "RANGE"}],
    }

"""Where a chain's head is anchored outside the audit table: two ledger items.

- ``auditoria-cabeca#{chain}`` (``seqCabeca``, ``hashCabeca``): moved by any writer
  after its append with a conditional ``UpdateItem`` (``AuditChain._anchor``). The
  tools, the decision Lambda and a person's reply anchor here: their roles may
  update only these keys of the ledger (infra/contract.py).
- ``conversa#{chain}`` (``cadeiaSeq``, ``cadeiaHash``): the conversation's own
  item. The orchestrator's turn already rewrites it once, in its fenced commit; that
  UpdateItem also sets the turn's last link, so a turn pays no anchor write of its
  own. The commit cannot be conditioned on the anchor (a commit never
  fails for audit bookkeeping), so whether the move is along the chain is decided
  before it (``AuditChain.head_for_commit``); the lease that precedes every commit
  returns the anchor the commit would move from, and the version fence guarantees
  nobody moved it in between.

``verify`` checks the chain against BOTH anchors: either one ahead of the chain's
end is a truncated tail, either one naming a record that is not there a rewritten
one. Each anchor only moves forward along the chain, so neither can "heal" a tail
deleted and re-appended. This module knows the ledger only by the key prefixes and
attribute names above (the ledger's own modules import them from here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ANCHOR_PREFIX = "auditoria-cabeca#"  # the ledger item that anchors a chain's head
CONVERSATION_PREFIX = "conversa#"  # the conversation's item (cadencia_shared.ledger.conversation_pk)
# Its anchor's attributes. The hash is stored as its 32 raw bytes (a DynamoDB Binary),
# not 64 hex characters: the lease and the commit rewrite this item every turn and
# bill it by the KB (a transaction twice), so every byte it carries is paid three times.
CONVERSATION_SEQ, CONVERSATION_HASH = "cadeiaSeq", "cadeiaHash"
LEDGER_KEY = "pk"  # the ledger table's partition key (cadencia_shared.ledger.TABLE_KEY)
# A ledger item holding an audit record written WITHOUT the chain (cadencia_shared.ledger's
# ``audit_pk``: a writer run without ``AUDIT_TABLE``): no hash, no anchor, flagged by the verifier.
UNCHAINED_PREFIX = "auditoria#"


@dataclass(frozen=True)
class Head:
    seq: int
    hash: str


GENESIS = "0" * 64  # a chain's first link's ``hashAnterior``
EMPTY_CHAIN = Head(0, GENESIS)  # the "head" before a chain's first link


def conversation_anchor(item: dict[str, Any]) -> Head | None:
    """The anchor stored on a conversation item (deserialized), if any."""
    if CONVERSATION_SEQ not in item or CONVERSATION_HASH not in item:
        return None
    return Head(int(item[CONVERSATION_SEQ]), _hex(item[CONVERSATION_HASH]))


def conversation_anchor_values(head: Head) -> tuple[int, bytes]:
    """(``cadeiaSeq``, ``cadeiaHash``) as the commit stores them."""
    return head.seq, bytes.fromhex(head.hash)


def _hex(stored: Any) -> str:
    # Binary attributes read back as bytes (cadencia_shared.dynamo_types).
    return stored.hex() if isinstance(stored, bytes | bytearray) else str(stored)


@dataclass(frozen=True)
class ChainReport:
    """One chain verified: ``checked`` valid links, the first broken one (``broken``, an
    ``audit_chain.Broken``) or None, and ``unanchored``: how many of its last links lie after
    every anchor — links no writer's anchor (nor the turn's fenced commit) acknowledged."""

    checked: int
    broken: Any
    unanchored: int = 0

    @property
    def unanchored_from(self) -> int:
        return self.checked - self.unanchored + 1


def unanchored_links(checked: int, anchors: list[Head]) -> int:
    """Links of an intact chain of ``checked`` after its furthest anchor (all of them
    when it has none). Each writer anchors after its append, so such a tail is a writer
    killed between its record and its anchor (or a turn killed before its commit, or
    one still running) — or a link put by an identity that writes the audit table but
    moves no anchor: the chain cannot tell which, the verifier flags it."""
    return max(0, checked - max((anchor.seq for anchor in anchors), default=0))


def anchor_problem(checked: int, anchors: list[Head], hashes_at: dict[int, str]) -> tuple[int, str] | None:
    """(seq, problem) of a chain of ``checked`` valid records against its anchors:
    ending before either one, its tail was deleted; an anchored seq holding another
    record (``hashes_at``: seq -> hash read there), a tail deleted and rewritten."""
    if any(anchor.seq > checked for anchor in anchors):
        return checked + 1, "cauda_truncada"
    for anchor in sorted(anchors, key=lambda a: a.seq):
        if hashes_at.get(anchor.seq) != anchor.hash:
            return anchor.seq, "ancora_divergente"
    return None


class LedgerAnchors:
    """Reads both anchors of a chain from the ledger table (strongly consistent)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    def item_head(self, chain: str) -> Head | None:
        """The ``auditoria-cabeca#`` anchor."""
        return self._read(ANCHOR_PREFIX + chain, "seqCabeca", "hashCabeca")

    def conversation_head(self, chain: str) -> Head | None:
        """The anchor on the conversation's item."""
        return self._read(CONVERSATION_PREFIX + chain, CONVERSATION_SEQ, CONVERSATION_HASH)

    def heads(self, chain: str) -> list[Head]:
        return [head for head in (self.item_head(chain), self.conversation_head(chain)) if head is not None]

    def _read(self, key: str, seq_name: str, hash_name: str) -> Head | None:
        item = self.client.get_item(TableName=self.table_name, Key={LEDGER_KEY: {"S": key}}, ConsistentRead=True,
                                    ProjectionExpression="#s, #h",
                                    ExpressionAttributeNames={"#s": seq_name, "#h": hash_name}).get("Item")
        if not item or seq_name not in item or hash_name not in item:
            return None
        stored = item[hash_name]  # hex text on the anchor item, raw bytes on a conversation
        return Head(int(item[seq_name]["N"]), stored["S"] if "S" in stored else _hex(stored["B"]))

    def anchored_chains(self) -> list[str]:
        """Every chain with an anchor of either kind (a chain whose records were ALL
        deleted is found only here). A Scan of the ledger's keys, filtered: the
        verifier's full pass, not a hot path."""
        found: set[str] = set()
        kwargs: dict[str, Any] = {
            "TableName": self.table_name, "ProjectionExpression": LEDGER_KEY,
            "FilterExpression": f"begins_with({LEDGER_KEY}, :a) OR (begins_with({LEDGER_KEY}, :c) "
                                f"AND attribute_exists({CONVERSATION_SEQ}))",
            "ExpressionAttributeValues": {":a": {"S": ANCHOR_PREFIX}, ":c": {"S": CONVERSATION_PREFIX}}}
        while True:
            resp = self.client.scan(**kwargs)
            for item in resp.get("Items", []):
                key = item[LEDGER_KEY]["S"]
                found.add(key.removeprefix(ANCHOR_PREFIX) if key.startswith(ANCHOR_PREFIX)
                          else key.removeprefix(CONVERSATION_PREFIX))
            if "LastEvaluatedKey" not in resp:
                return sorted(found)
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def unchained_records(self, conversation_id: str | None = None) -> dict[str, int]:
        """How many audit records sit in the ledger as ``auditoria#`` items, outside any
        chain, per conversation (``-``: none named); only ``conversation_id``'s when given.
        A filtered Scan: the verifier's pass, not a hot path."""
        values: dict[str, Any] = {":u": {"S": UNCHAINED_PREFIX}}
        condition = f"begins_with({LEDGER_KEY}, :u)"
        if conversation_id is not None:
            condition, values[":c"] = condition + " AND conversaId = :c", {"S": conversation_id}
        kwargs: dict[str, Any] = {"TableName": self.table_name, "FilterExpression": condition,
                                  "ProjectionExpression": "conversaId", "ExpressionAttributeValues": values}
        found: dict[str, int] = {}
        while True:
            resp = self.client.scan(**kwargs)
            for item in resp.get("Items", []):
                chain = item.get("conversaId", {}).get("S") or "-"
                found[chain] = found.get(chain, 0) + 1
            if "LastEvaluatedKey" not in resp:
                return found
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

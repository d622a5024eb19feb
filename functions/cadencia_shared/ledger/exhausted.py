"""The retry ceiling's read-side hint: attempt keys of one conversation known to be exhausted.

A counter (``attempts`` module) only grows: no TTL attribute, no reset, no
DeleteItem anywhere. So once ``register_attempt`` has returned a number n for a key
(conversation, subject, tool), every later ``ADD`` returns more than n; with
n >= the ceiling, every later attempt is refused. A record "key k has reached n"
can therefore never let a call through that the counter would refuse — it can
only refuse earlier than needed, and it cannot even do that, because it holds
only numbers the counter really returned. Deciding the refusal from it saves the
counter's write (a ceiling refusal costs the lease, its one audit link
and the commit — 3 writes).

Where it lives: an attribute of the conversation item (``EXHAUSTED_ATTRIBUTE``, a
map from a short hash of (subject, tool) to the last number known), read by the
lease that starts every turn and written by the turn's fenced commit — no write of
its own. Only a turn that runs under the lease uses it (``ExhaustedAttempts`` is
passed to the controls by the loop); every other path (the approval resume, a
person's reply, a control chain run alone) has none and numbers on the counter.

What it cannot know: attempts numbered without it (a turn killed before its
commit, a path without a conversation state). Then its number is behind the
counter: the next read-decided refusal is numbered last known + 1, which may equal
a number the counter (or a read-decided refusal of a turn killed before its commit)
already gave. Such a collision is harmless to the decision
(both are refusals) and is visible, not hidden: ``Ledger.attempts`` lists the
counter's record and the read-decided refusal both, with the same number.

Bounded: at most ``EXHAUSTED_KEYS_KEPT`` keys (a conversation touches a handful);
past that the keys this turn noted are kept and others dropped (a DynamoDB map has
no order, so which stored ones go is arbitrary), which only sends their next attempt
back to the counter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

EXHAUSTED_ATTRIBUTE = "tetosAtingidos"
EXHAUSTED_KEYS_KEPT = 32
_HEX = frozenset("0123456789abcdef")
_KEY_HEX = 16  # 64 bits: a collision inside one conversation's few keys is not a practical concern
# No counter ever returns more (each number is one tool call of one conversation), and a
# mark's successor must still be a DynamoDB number (38 digits): a stored 1E+40 would
# make every commit that advances it raise decimal.Inexact — a conversation stuck.
_NUMBER_MAX = 10**9


def exhausted_key(subject: str, tool: str) -> str:
    """A short, fixed-size key for (subject, tool): the subject is an order id or a
    customer's fixed subject, and the map lives on an item paid per byte each turn."""
    return hashlib.sha256(f"{subject}\x1f{tool}".encode()).hexdigest()[:_KEY_HEX]


def exhausted_from_item(item: Mapping[str, Any]) -> dict[str, int]:
    """The stored map, keeping only well-formed entries: a malformed entry is dropped
    (a dropped entry only sends that key back to the counter, never lets a call through)."""
    stored = item.get(EXHAUSTED_ATTRIBUTE)
    if not isinstance(stored, Mapping):
        return {}
    return {key: int(number) for key, number in stored.items() if _well_formed(key, number)}


def _well_formed(key: Any, number: Any) -> bool:
    """A key ``exhausted_key`` could have made, and an integral number a counter can
    have returned, 0..``_NUMBER_MAX`` (DynamoDB numbers read back as Decimal; no
    strings, no bools, no infinities, nothing a refusal could not advance)."""
    if not (isinstance(key, str) and len(key) == _KEY_HEX and set(key) <= _HEX):
        return False
    if isinstance(number, bool):
        return False
    if isinstance(number, Decimal):
        return number.is_finite() and number == number.to_integral_value() and 0 <= number <= _NUMBER_MAX
    return isinstance(number, int) and 0 <= number <= _NUMBER_MAX


class ExhaustedAttempts:
    """One turn's view of the exhausted keys: seeded from the lease's item, noted
    by the retry ceiling, written back by the commit (``numbers``)."""

    def __init__(self, numbers: Mapping[str, int] | None = None) -> None:
        self._numbers: dict[str, int] = dict(numbers or {})

    @property
    def numbers(self) -> dict[str, int]:
        """What the commit stores: at most ``EXHAUSTED_KEYS_KEPT`` keys, the last noted
        kept (the seeded ones come first, in the stored map's order)."""
        kept = list(self._numbers.items())[-EXHAUSTED_KEYS_KEPT:]
        return dict(kept)

    def note(self, subject: str, tool: str, number: int, ceiling: int) -> None:
        """The counter returned ``number`` for this key: remembered once it reaches the
        ceiling (the ceiling-th, allowed, attempt already marks the key)."""
        if number < ceiling:
            return
        key = exhausted_key(subject, tool)
        known = max(number, self._numbers.pop(key, 0))
        self._numbers[key] = known  # re-inserted: the newest noted key is kept last when bounding

    def refused_number(self, subject: str, tool: str, ceiling: int) -> int | None:
        """The number of this attempt when the key is known to be at or past the
        ceiling (and advance the known number); None: the counter must decide."""
        key = exhausted_key(subject, tool)
        known = self._numbers.get(key)
        if known is None or known < ceiling:
            return None
        self.note(subject, tool, known + 1, ceiling)
        return known + 1

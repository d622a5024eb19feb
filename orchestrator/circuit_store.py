"""The circuit breaker's shared state: one item per tool in the ledger table
(``disjuntor#{ferramenta}``, ``tipo = disjuntor``), so every orchestrator instance
counts the same consecutive failures and sees the same state.

Why not Powertools' ``utilities.circuit_breaker`` as-is: it counts failures in
each execution environment's memory and writes only on a transition, so K warm
instances let K x N failing calls through before opening (measured with
``scripts/medir-disjuntor``: 3, 6 and 12 calls for K = 1, 2, 4 at N = 3). It is also
a decorator around the call, while the control chain splits before/after. Here
the failure counter is an atomic ``ADD`` on the shared item, every decision one
conditional write:

- a failure: ``ADD falhas 1`` (the answer tells whether N was reached), then the
  trip ``FECHADO → ABERTO`` conditioned on ``estado = FECHADO`` — one writer wins;
- a success: ``falhas = 0`` (conditioned on a streak existing, so it is cheap);
- the probe: ``ABERTO → MEIO_ABERTO`` conditioned on the ``abertoEmMs`` that was
  read — one instance gets it, with a lease (``sondaAteMs``) so a probe whose
  orchestrator died does not keep the circuit half-open forever;
- the probe's answer: close or reopen, conditioned on still owning the probe.

``StateCache`` keeps the last state read in the execution environment for a few
seconds, so a healthy tool's call does not pay a GetItem each time (its module doc
below says which states, for how long, and what that costs).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from cadencia_shared.dynamo_types import deserialize, deserialize_item, serialize_item
from cadencia_shared.ledger import TABLE_KEY, Ledger

ITEM_TYPE = "disjuntor"


class CircuitState(StrEnum):
    CLOSED = "fechado"
    OPEN = "aberto"
    HALF_OPEN = "meio_aberto"


@dataclass(frozen=True)
class CircuitRecord:
    state: CircuitState
    failures: int = 0
    opened_at_ms: int = 0
    probe_owner: str | None = None
    probe_until_ms: int = 0


class CircuitStore:
    def __init__(self, ledger: Ledger) -> None:
        self.client = ledger.client
        self.table_name = ledger.table_name
        self.now_ms = ledger.now_ms

    @staticmethod
    def new_owner() -> str:
        return uuid.uuid4().hex

    def read(self, tool: str) -> CircuitRecord:
        resp = self.client.get_item(TableName=self.table_name, Key=_key(tool), ConsistentRead=True)
        item = deserialize_item(resp.get("Item", {}))
        return CircuitRecord(
            state=CircuitState(item.get("estado", CircuitState.CLOSED.value)),
            failures=int(item.get("falhas", 0)),
            opened_at_ms=int(item.get("abertoEmMs", 0)),
            probe_owner=item.get("sondaDono"),
            probe_until_ms=int(item.get("sondaAteMs", 0)),
        )

    def add_failure(self, tool: str) -> int:
        """The new number of consecutive failures (atomic: concurrent failures
        from any instance each get their own number)."""
        resp = self.client.update_item(
            TableName=self.table_name, Key=_key(tool),
            UpdateExpression="ADD falhas :um SET tipo = :tipo, estado = if_not_exists(estado, :fechado)",
            ExpressionAttributeValues=serialize_item(
                {":um": 1, ":tipo": ITEM_TYPE, ":fechado": CircuitState.CLOSED.value}),
            ReturnValues="UPDATED_NEW",
        )
        return int(deserialize(resp["Attributes"]["falhas"]))

    def trip(self, tool: str, threshold: int) -> bool:
        """FECHADO → ABERTO once ``falhas`` reached ``threshold``; True for the one writer that did it."""
        return self._conditional(
            tool, "SET estado = :aberto, abertoEmMs = :agora",
            "estado = :fechado AND falhas >= :n",
            {":aberto": CircuitState.OPEN.value, ":agora": self.now_ms(), ":fechado": CircuitState.CLOSED.value,
             ":n": threshold},
        )

    def reset_failures(self, tool: str) -> None:
        self._conditional(tool, "SET falhas = :zero", "estado = :fechado AND falhas > :zero",
                          {":zero": 0, ":fechado": CircuitState.CLOSED.value})

    def take_probe(self, tool: str, seen: CircuitRecord, owner: str, lease_ms: int) -> bool:
        """Become the one probe: from the open state that was read, or from a half-open
        one whose probe lease ran out (its orchestrator died mid-probe)."""
        if seen.state is CircuitState.OPEN:
            condition, old = "estado = :aberto AND abertoEmMs = :visto", seen.opened_at_ms
        else:
            condition, old = "estado = :meio AND sondaAteMs = :visto", seen.probe_until_ms
        return self._conditional(
            tool, "SET estado = :meio, sondaDono = :dono, sondaAteMs = :ate", condition,
            {":aberto": CircuitState.OPEN.value, ":meio": CircuitState.HALF_OPEN.value, ":visto": old,
             ":dono": owner, ":ate": self.now_ms() + lease_ms},
        )

    def close(self, tool: str, owner: str) -> bool:
        return self._conditional(
            tool, "SET estado = :fechado, falhas = :zero REMOVE sondaDono, sondaAteMs, abertoEmMs",
            "estado = :meio AND sondaDono = :dono",
            {":fechado": CircuitState.CLOSED.value, ":zero": 0, ":meio": CircuitState.HALF_OPEN.value,
             ":dono": owner},
        )

    def reopen(self, tool: str, owner: str, *, restart_cooldown: bool) -> bool:
        """The probe failed (a new cooldown), or was never sent (a later control refused
        it: the cooldown stays over, so the next call probes)."""
        sets = "SET estado = :aberto, falhas = :zero" + (", abertoEmMs = :agora" if restart_cooldown else "")
        values: dict[str, Any] = {":aberto": CircuitState.OPEN.value, ":zero": 0, ":meio": CircuitState.HALF_OPEN.value,
                                  ":dono": owner}
        if restart_cooldown:
            values[":agora"] = self.now_ms()
        return self._conditional(tool, sets + " REMOVE sondaDono, sondaAteMs", "estado = :meio AND sondaDono = :dono",
                                 values)

    def _conditional(self, tool: str, update: str, condition: str, values: dict[str, Any]) -> bool:
        used = {k: v for k, v in values.items() if k in update or k in condition}
        try:
            self.client.update_item(TableName=self.table_name, Key=_key(tool), UpdateExpression=update,
                                    ConditionExpression=condition, ExpressionAttributeValues=serialize_item(used))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _key(tool: str) -> dict[str, Any]:
    return {TABLE_KEY: {"S": f"{ITEM_TYPE}#{tool}"}}


class StateCache:
    """The circuit state last read, kept in this execution environment (the
    orchestrator is built once per environment, and so is its breaker) so a healthy
    tool's call does not pay a consistent GetItem every time.

    What is kept, and for how long:

    - CLOSED with no failure streak: ``closed_ttl_ms`` (``DISJUNTOR_CACHE_S``; 0 turns
      the cache off), capped at half the cooldown so no probe can start while it is
      still trusted (the probe stays single). The cost: for that long after ANOTHER environment opened the
      circuit, this one still calls the tool. The breaker forgets the entry as soon as
      a call fails here, so against a tool that keeps failing each warm environment
      sends at most one more call (the one that fails) — tests/test_breaker_cache.py. A success inside
      the window also does not
      reset failures other environments counted meanwhile (it read none), so the
      circuit may open early when failures and successes interleave across
      environments, never late.
    - OPEN: until ``min(ttl, the cooldown's end)`` — it cannot change before its
      cooldown ends (only a probe moves it, and a probe waits for the cooldown), so
      the refusals of an outage cost no reads and the first call after the cooldown
      reads again and may probe.
    - HALF_OPEN, and CLOSED with a failure streak: never (the probe may close it at
      any moment; a streak's successes must reset it).
    """

    def __init__(self, store: CircuitStore, *, closed_ttl_ms: int, cooldown_ms: int) -> None:
        self.store = store
        self.closed_ttl_ms = closed_ttl_ms
        self.cooldown_ms = cooldown_ms
        self._kept: dict[str, tuple[CircuitRecord, int]] = {}

    def read(self, tool: str) -> CircuitRecord:
        now = self.store.now_ms()
        kept = self._kept.get(tool)
        if kept is not None and now < kept[1]:
            return kept[0]
        record = self.store.read(tool)
        until = self._keep_until(record, now)
        if until > now:
            self._kept[tool] = (record, until)
        else:
            self._kept.pop(tool, None)
        return record

    def forget(self, tool: str) -> None:
        """This environment saw the tool fail or moved the state: the next call reads."""
        self._kept.pop(tool, None)

    def _keep_until(self, record: CircuitRecord, now: int) -> int:
        if self.closed_ttl_ms <= 0:
            return now
        if record.state is CircuitState.CLOSED and record.failures == 0:
            # Never as long as the cooldown: a circuit opened just after this read may
            # be probed one cooldown later, and a CLOSED still trusted then would send a
            # second call to the half-open tool. Half of it leaves room for the clock
            # skew between environments (abertoEmMs is the opener's clock).
            return now + min(self.closed_ttl_ms, self.cooldown_ms // 2)
        if record.state is CircuitState.OPEN:
            return min(now + self.closed_ttl_ms, record.opened_at_ms + self.cooldown_ms)
        return now

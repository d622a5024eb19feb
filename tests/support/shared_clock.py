"""A clock several spawned processes read from one shared value, moved only by the test.

Cooldowns, probe leases and cache lifetimes are then crossed when the test says so,
never because a loaded machine was slow to start or run a process (or fast enough to
stay inside a window). Pass it to a ``spawn`` process as an argument; give it to
``Ledger(clock=...)`` (and ``AuditChain(clock=...)``) as the wall clock."""
from __future__ import annotations

import time
from typing import Any


class SharedClock:
    def __init__(self, context: Any, start: float | None = None) -> None:
        self._now = context.Value("d", time.time() if start is None else start)

    def __call__(self) -> float:
        return self._now.value

    def advance(self, seconds: float) -> None:
        with self._now.get_lock():
            self._now.value += seconds

"""The circuit breaker control: per tool, shared by every orchestrator instance
(state in ``circuit_store``).

    fechado ──N consecutive failures──► aberto ──cooldown──► meio_aberto (one probe)
       ▲                                  ▲                        │
       └────────── probe answered ────────┼──── probe failed ──────┘

A failure is a call the tool did not answer: its Lambda crashed, timed out, was
throttled or could not be invoked. A typed refusal (``ok: false``: order not
found, over the limit...) is the tool working, and breaks a streak like any
answer. While open, a call is refused before it is invoked: the model reads an
``is_error`` result and the customer a reply written here, true whatever the
tool would have done (it was not called). Each state change is audited
(``DISJUNTOR_ABERTO`` / ``_MEIO_ABERTO`` / ``_FECHADO``) and counted
(``TransicoesDoDisjuntor{Ferramenta,Estado}``, alarmed on ``aberto``); each
refusal is counted (``RecusasPorDisjuntor{Ferramenta}``).

Each instance keeps the state it read for a few seconds (``circuit_store.StateCache``,
``DISJUNTOR_CACHE_S``): a healthy tool's call then costs no read, and after another
instance opens the circuit this one sends at most one more failing call.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cadencia_shared.ledger import Ledger
from cadencia_shared.observability import Metric, count, count_for_tool

from . import texts
from .circuit_store import CircuitRecord, CircuitState, CircuitStore, StateCache
from .controls import CallContext, CallOutcome, Refusal
from .steps import Reply


class BreakerRefusal(StrEnum):
    OPEN = "ferramenta_indisponivel"


@dataclass(frozen=True)
class _Pass:
    probe_owner: str | None  # set: this call is the half-open probe
    # The consecutive failures read before the call. A success resets them only when
    # there were some: a conditional write whose condition fails still costs a write
    # unit, and resetting a count read as 0 was one such write per call.
    # A failure landing between the read and this call's success is then not reset
    # by it: the circuit may open one failure early, never late.
    failures_seen: int = 0


class CircuitBreaker:
    def __init__(self, ledger: Ledger, *, failures: int, cooldown_s: float, probe_margin_s: float = 5.0,
                 closed_cache_s: float = 0.0) -> None:
        """``closed_cache_s``: how long this environment trusts a CLOSED state it read
        (``circuit_store.StateCache``: what that costs); 0 reads before every call."""
        self.ledger = ledger
        self.store = CircuitStore(ledger)
        self.failures = failures
        self.cooldown_ms = int(cooldown_s * 1000)
        self.probe_margin_ms = int(probe_margin_s * 1000)
        self.states = StateCache(self.store, closed_ttl_ms=int(closed_cache_s * 1000), cooldown_ms=self.cooldown_ms)

    def before(self, ctx: CallContext) -> Refusal | None:
        tool = ctx.call.spec.name
        record = self.states.read(tool)
        if record.state is CircuitState.CLOSED:
            ctx.notes[CircuitBreaker] = _Pass(None, record.failures)
            return None
        if self._probe_due(record):
            self.states.forget(tool)
            owner = self.store.new_owner()
            # A probe lease outlives the probe's own invocation (the tool's timeout).
            lease_ms = int(ctx.call.spec.timeout_s * 1000) + self.probe_margin_ms
            if self.store.take_probe(tool, record, owner, lease_ms):
                self._changed(ctx, CircuitState.HALF_OPEN)
                ctx.notes[CircuitBreaker] = _Pass(owner)
                return None
        return self._refuse(ctx)

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        tool = ctx.call.spec.name
        seen: _Pass = ctx.notes[CircuitBreaker]
        probe = seen.probe_owner
        if probe is not None or outcome.invocation is None or not outcome.invocation.answered:
            # It failed here, or this call moves the state: the next call reads it.
            self.states.forget(tool)
        if outcome.invocation is None:
            if probe is not None:  # never sent: the next call probes instead
                self.store.reopen(tool, probe, restart_cooldown=False)
            return
        if outcome.invocation.answered:
            if probe is None:
                if seen.failures_seen > 0:
                    self.store.reset_failures(tool)
            elif self.store.close(tool, probe):
                self._changed(ctx, CircuitState.CLOSED)
            return
        if probe is not None:
            if self.store.reopen(tool, probe, restart_cooldown=True):
                self._changed(ctx, CircuitState.OPEN)
            return
        if self.store.add_failure(tool) >= self.failures and self.store.trip(tool, self.failures):
            self._changed(ctx, CircuitState.OPEN)

    def _probe_due(self, record: CircuitRecord) -> bool:
        now = self.store.now_ms()
        if record.state is CircuitState.OPEN:
            return now >= record.opened_at_ms + self.cooldown_ms
        return now >= record.probe_until_ms  # half-open whose prober died

    def _refuse(self, ctx: CallContext) -> Refusal:
        spec = ctx.call.spec
        count_for_tool(Metric.BREAKER_REFUSALS, spec.name)
        self.ledger.append_audit(conversation_id=ctx.call.conversation_id, event="BLOQUEADO_POR_DISJUNTOR",
                                 details={"ferramenta": spec.name})
        return Refusal(
            BreakerRefusal.OPEN,
            {"mensagem": "Ferramenta indisponível no momento (falhas seguidas); não foi executada. Não tente novamente."},
            ending=Reply(texts.TOOL_UNAVAILABLE, "disjuntor_aberto"),
        )

    def _changed(self, ctx: CallContext, state: CircuitState) -> None:
        tool = ctx.call.spec.name
        count(Metric.BREAKER_TRANSITIONS, {"Ferramenta": tool, "Estado": state.value})
        self.ledger.append_audit(conversation_id=ctx.call.conversation_id, event=f"DISJUNTOR_{state.value.upper()}",
                                 details={"ferramenta": tool, "estado": state.value, "limiteDeFalhas": self.failures})

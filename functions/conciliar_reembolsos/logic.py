"""One reconciliation pass. No AWS or HTTP call here: the ledger and the refund
service (its gateway, secret reader and ERP repository) are injected.

For each claim in the ledger's sparse index of unsettled claims (oldest first):

- in progress / sending / reconciling under a live lease -> left alone (its owner
  is working; ``em_andamento``);
- in progress past its lease -> no send was ever recorded for it (that record
  precedes every POST): taken over and released (``liberado``);
- unknown, or sending / reconciling past its lease -> taken over and the claim's
  own request re-sent (``RefundService.reconcile_claim``): the gateway's answer
  settles it (``executado`` / ``recusado``) or it stays ``desconhecido``;
- released in the ledger (declined, or failed before the gateway) but still listed
  -> its ERP release may not have committed (a crash between the two): freed under
  the order's row lock, then unlisted (``liberado`` / ``recusado``);
- past the gateway's idempotency window (``GATEWAY_IDEMPOTENCY_WINDOW_H``) ->
  taken over and *not* re-sent: it stays ``desconhecido`` for a person
  (``conciliacao_manual``).

Money moves only through ``emitir_reembolso.transitions`` (no copy of its rules
here). A failure on one claim is counted (``erro``) and the pass goes on: the
claim stays in the index and the next pass tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from cadencia_shared.ledger import SETTLED_CLAIM_STATUSES, ClaimStatus, Ledger, RefundClaim
from cadencia_shared.observability import OUTCOME_DIMENSION, Metric, count, seconds
from emitir_reembolso.logic import RefundService

Progress = Callable[[str], None]
_log = logging.getLogger(__name__)


class Verdict(StrEnum):
    EXECUTED = "executado"
    DECLINED = "recusado"
    RELEASED = "liberado"
    UNKNOWN = "desconhecido"
    MANUAL = "conciliacao_manual"  # past the gateway's idempotency window: not re-sent, a person settles it
    BUSY = "em_andamento"
    ERROR = "erro"


_VERDICT_OF = {
    ClaimStatus.EXECUTED: Verdict.EXECUTED,
    ClaimStatus.DECLINED: Verdict.DECLINED,
    ClaimStatus.FAILED_BEFORE_GATEWAY: Verdict.RELEASED,
    ClaimStatus.UNKNOWN: Verdict.UNKNOWN,
}


@dataclass(frozen=True)
class Visit:
    key: str
    order_id: str
    status_before: str
    verdict: Verdict
    age_s: float


@dataclass
class PassReport:
    visits: list[Visit] = field(default_factory=list)

    def count(self, verdict: Verdict) -> int:
        return sum(1 for v in self.visits if v.verdict is verdict)

    @property
    def oldest_unsettled_s(self) -> float:
        """Age of the oldest claim this pass could not settle (0 when none)."""
        pending = (Verdict.UNKNOWN, Verdict.MANUAL, Verdict.BUSY, Verdict.ERROR)
        return max((v.age_s for v in self.visits if v.verdict in pending), default=0.0)

    def summary(self) -> dict[str, int | float]:
        return {**{v.value: self.count(v) for v in Verdict}, "idadeMaximaPendenteS": round(self.oldest_unsettled_s, 1)}


def _age_s(claim: RefundClaim, now_ms: int) -> float:
    created = datetime.fromisoformat(claim.created_at.replace("Z", "+00:00"))
    return max(0.0, now_ms / 1000 - created.timestamp())


@dataclass
class Reconciler:
    ledger: Ledger
    service: RefundService
    batch: int = 100

    def run_pass(self, progress: Progress = lambda _: None) -> PassReport:
        report = PassReport()
        claims = self.ledger.unsettled_claims(limit=self.batch)
        progress(f"{len(claims)} reivindicação(ões) pendente(s)")
        for index, claim in enumerate(claims, 1):
            now = self.ledger.now_ms()
            verdict = self._visit(claim, now)
            visit = Visit(claim.key, claim.order_id, claim.status.value, verdict, _age_s(claim, now))
            report.visits.append(visit)
            count(Metric.RECONCILIATIONS, {OUTCOME_DIMENSION: verdict.value})
            progress(f"[{index}/{len(claims)}] {claim.key}: {claim.status.value} -> {verdict.value}")
        # Every pass emits the age (0 when nothing is pending), so the alarm never
        # reads "missing data" as good news while a claim waits.
        seconds(Metric.OLDEST_UNSETTLED_AGE, report.oldest_unsettled_s)
        return report

    def _visit(self, claim: RefundClaim, now_ms: int) -> Verdict:
        if claim.status in SETTLED_CLAIM_STATUSES:  # released, but its ERP release may not have committed
            return self._guarded(claim, lambda: self.service.finish_release(claim))
        if claim.status is ClaimStatus.EXECUTED:  # debited, but its ERP update was lost
            return self._guarded(claim, lambda: (self.service.finish_executed(claim), True))
        if claim.status is not ClaimStatus.UNKNOWN and not claim.lease_expired(now_ms):
            return Verdict.BUSY
        if claim.status is ClaimStatus.IN_PROGRESS:
            return self._guarded(claim, lambda: self.service.release_abandoned(claim))
        verdict = self._guarded(claim, lambda: self.service.reconcile_claim(claim))
        if verdict is Verdict.UNKNOWN and self.service.past_idempotency_window(claim):
            return Verdict.MANUAL
        return verdict

    @staticmethod
    def _guarded(claim: RefundClaim, settle: Callable[[], tuple[RefundClaim, bool]]) -> Verdict:
        try:
            settled, took_over = settle()
        except Exception as err:  # noqa: BLE001 - one claim's failure must not stop the pass; it stays pending
            _log.warning("claim not reconciled", extra={"chave": claim.key, "erro": type(err).__name__})
            return Verdict.ERROR
        if not took_over:
            return Verdict.BUSY
        return _VERDICT_OF.get(settled.status, Verdict.BUSY)

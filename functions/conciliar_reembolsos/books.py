"""The books' consistency audit: the ERP, the ledger and the gateway, key by key.

Run after each reconciliation pass (and locally by ``scripts/local-stack audit``).
The keys come from the ERP (every ``reservado`` row, and every ``executado`` row of
the last ``BOOKS_AUDIT_WINDOW_H`` hours) and from the gateway's debit listing when one
is configured (``debits.DebitListing``). The reads are ordered so that a refund
running meanwhile never looks like a disagreement: ERP rows first, then the gateway
(whose debits precede any ``executado`` row), then the claims, then the ERP rows
again (a claim marked ``erpAtualizado`` was committed in the ERP before the mark).

Disagreements (``Divergence``), each a metric ``DivergenciasNosLivros{Divergencia}``
and an operator line (ids and amounts only, no personal data):

- ``reserva_sem_reivindicacao_viva``: a reservation whose claim is absent or released.
  Repaired when provably safe: a released claim through the refund's own release
  (under the order's row lock); an absent claim only when the row is older than the
  claim's lease and, re-read under the row lock, still has no claim (a claim is
  written before its reservation commits, under that lock, so none can be in flight);
- ``executado_sem_reembolso_no_erp``: the ledger says executed and the ERP updated,
  the ERP has no ``executado`` row (reported: a person decides);
- ``reembolso_no_erp_sem_reivindicacao_executada``;
- ``debito_sem_reivindicacao_executada``: a debit whose claim is absent or released;
- ``executado_sem_debito``: an ``executado`` ERP row the gateway's listing lacks;
- ``valores_divergentes``: the amounts of one key differ.

``DivergenciasNosLivrosAbertas`` (no dimension) is emitted every pass with the number
left unrepaired (0 included, so silence is never read as agreement): its alarm fires at 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum

from cadencia_shared.ledger import SETTLED_CLAIM_STATUSES, ClaimStatus, RefundClaim, RefundClaims
from cadencia_shared.observability import Metric, count
from emitir_reembolso.gateway import wire_idempotency_key
from emitir_reembolso.logic import RefundService

from .debits import DebitListing, GatewayDebit
from .erp_books import ErpBooks, ErpRow

Progress = Callable[[str], None]
DIVERGENCE_DIMENSION = "Divergencia"
_LEDGER_KEY_MAX = 1000  # bytes of a key (DynamoDB allows 1,024 for the whole ``reivindicacao#…`` pk)


class Divergence(StrEnum):
    UNCLAIMED_RESERVATION = "reserva_sem_reivindicacao_viva"
    EXECUTED_WITHOUT_ERP = "executado_sem_reembolso_no_erp"
    ERP_WITHOUT_EXECUTED = "reembolso_no_erp_sem_reivindicacao_executada"
    DEBIT_WITHOUT_EXECUTED = "debito_sem_reivindicacao_executada"
    EXECUTED_WITHOUT_DEBIT = "executado_sem_debito"
    AMOUNTS_DIFFER = "valores_divergentes"


_ACTION = {
    Divergence.UNCLAIMED_RESERVATION: "nenhuma reivindicação viva segura este valor",
    Divergence.EXECUTED_WITHOUT_ERP: "conferir o pedido no ERP e lançar o reembolso que o gateway fez",
    Divergence.ERP_WITHOUT_EXECUTED: "conferir no gateway se houve débito e corrigir o ERP ou o ledger",
    Divergence.DEBIT_WITHOUT_EXECUTED: "conferir o débito no gateway e o pedido no ERP",
    Divergence.EXECUTED_WITHOUT_DEBIT: "conferir no gateway se o débito existe",
    Divergence.AMOUNTS_DIFFER: "conferir o valor no gateway, no ERP e no ledger",
}


@dataclass(frozen=True)
class Finding:
    kind: Divergence
    key: str
    order_id: str
    detail: str
    repaired: bool = False

    def line(self) -> str:
        """What a person reads: ids, amounts and the next step (no personal data)."""
        outcome = "reserva liberada (reparado)" if self.repaired else _ACTION[self.kind]
        return f"divergência {self.kind.value}: pedido {self.order_id}, chave {self.key}: {self.detail} -> {outcome}"


@dataclass
class BooksReport:
    keys: int = 0
    gateway_listed: bool = False
    findings: list[Finding] = field(default_factory=list)

    @property
    def open(self) -> int:
        return sum(1 for f in self.findings if not f.repaired)

    def summary(self) -> dict[str, int | bool]:
        return {"chaves": self.keys, "divergencias": len(self.findings), "abertas": self.open,
                "reparadas": len(self.findings) - self.open, "gatewayListado": self.gateway_listed}


def _live(claim: RefundClaim | None) -> bool:
    return claim is not None and claim.status not in SETTLED_CLAIM_STATUSES


@dataclass
class BooksAudit:
    ledger: RefundClaims
    service: RefundService
    erp: ErpBooks
    debits: DebitListing | None
    window_s: int
    max_keys: int = 1000

    def run(self, progress: Progress = lambda _: None) -> BooksReport:
        report = BooksReport()
        first = {row.key: row for row in self.erp.rows(window_s=self.window_s, limit=self.max_keys)}
        listed = self._listed(report)
        by_wire = {wire_idempotency_key(key): key for key in first}
        debited: dict[str, list[GatewayDebit]] = {}
        for debit in listed or []:
            debited.setdefault(by_wire.get(debit.wire_key, debit.wire_key), []).append(debit)
        keys = sorted(set(first) | set(debited))
        report.keys = len(keys)
        listing = "listado" if listed is not None else "não listado"
        progress(f"auditoria: {len(keys)} chave(s) a verificar (gateway {listing})")
        claims = {key: self._claim_of(key) for key in keys}
        fresh = self.erp.rows_for(keys)
        for index, key in enumerate(keys, 1):
            found = self._judge(key, first.get(key), fresh.get(key), claims[key], debited.get(key), listed is not None)
            report.findings.extend(found)
            for finding in found:
                count(Metric.BOOKS_DIVERGENCES, {DIVERGENCE_DIMENSION: finding.kind.value})
                progress(finding.line())
            if index % 50 == 0 or index == len(keys):
                progress(f"[{index}/{len(keys)}] chaves verificadas")
        count(Metric.BOOKS_OPEN_DIVERGENCES, {}, report.open)
        return report

    def _claim_of(self, key: str) -> RefundClaim | None:
        # A key from the gateway's listing is outside input: one no claim could carry
        # (empty, or past DynamoDB's key size) is judged as unclaimed, never sent to the ledger.
        if not key or len(key.encode()) > _LEDGER_KEY_MAX:
            return None
        return self.ledger.get_claim(key)

    def _listed(self, report: BooksReport) -> list[GatewayDebit] | None:
        if self.debits is None:
            return None
        # The listing reaches further back than the ERP window: a debit precedes its ERP row.
        listed = self.debits.debits(since_s=self.window_s + self.service.idempotency_window_s)
        report.gateway_listed = True
        return listed

    def _judge(self, key: str, first: ErpRow | None, row: ErpRow | None, claim: RefundClaim | None,
               debits: list[GatewayDebit] | None, gateway_listed: bool) -> list[Finding]:
        known = row or first
        order_id = known.order_id if known else (claim.order_id if claim else (debits or [])[0].order_id)
        found: list[Finding] = []

        def add(kind: Divergence, detail: str, repaired: bool = False) -> None:
            found.append(Finding(kind, key, order_id, detail, repaired))

        if row is not None and row.status == "reservado" and not _live(claim):
            self._unclaimed(row, claim, add)
        _against_erp(row, claim, add)
        if gateway_listed:
            found.extend(self._against_gateway(key, order_id, first, claim, debits or []))
        return found

    def _unclaimed(self, row: ErpRow, claim: RefundClaim | None, add: Callable[..., None]) -> None:
        lease_s = self.service.claim_lease_s
        if claim is not None:  # released in the ledger: the refund's own release, under the row lock
            _, freed = self.service.finish_release(claim)
            add(Divergence.UNCLAIMED_RESERVATION, f"R$ {row.amount} reservado; reivindicação {claim.status.value}",
                freed)
        elif row.age_s > lease_s:
            freed = self.erp.release_unclaimed(row, min_age_s=lease_s,
                                               claim_absent=lambda k: self.ledger.get_claim(k) is None)
            add(Divergence.UNCLAIMED_RESERVATION, f"R$ {row.amount} reservado há {row.age_s:.0f} s; "
                                                  "nenhuma reivindicação", freed)

    @staticmethod
    def _against_gateway(key: str, order_id: str, first: ErpRow | None, claim: RefundClaim | None,
                         debits: list[GatewayDebit]) -> list[Finding]:
        total = sum((d.amount for d in debits), Decimal("0"))
        if debits and (claim is None or claim.status in SETTLED_CLAIM_STATUSES):
            state = claim.status.value if claim else "sem reivindicação"
            return [Finding(Divergence.DEBIT_WITHOUT_EXECUTED, key, order_id,
                            f"gateway debitou R$ {total} em {len(debits)} débito(s); ledger: {state}")]
        if first is not None and first.status == "executado" and not debits:
            return [Finding(Divergence.EXECUTED_WITHOUT_DEBIT, key, order_id,
                            f"R$ {first.amount} executado no ERP; nenhum débito no gateway")]
        if debits and claim is not None and claim.status is ClaimStatus.EXECUTED and total != claim.amount:
            return [Finding(Divergence.AMOUNTS_DIFFER, key, order_id,
                            f"gateway R$ {total} em {len(debits)} débito(s), ledger R$ {claim.amount}")]
        return []


def _against_erp(row: ErpRow | None, claim: RefundClaim | None, add: Callable[..., None]) -> None:
    """An executed claim and its ERP refund, each way."""
    executed = claim if claim is not None and claim.status is ClaimStatus.EXECUTED else None
    if executed is not None and executed.erp_updated and (row is None or row.status != "executado"):
        add(Divergence.EXECUTED_WITHOUT_ERP, f"R$ {executed.amount} executado no ledger; ERP: "
                                             f"{row.status if row else 'sem linha'}")
    if row is None or row.status != "executado":
        return
    if executed is None:
        add(Divergence.ERP_WITHOUT_EXECUTED, f"R$ {row.amount} executado no ERP; ledger: "
                                             f"{claim.status.value if claim else 'sem reivindicação'}")
    elif executed.amount != row.amount:
        add(Divergence.AMOUNTS_DIFFER, f"ERP R$ {row.amount}, ledger R$ {executed.amount}")

"""The ERP side of the books' audit, as the reconciler's DB user
(``cadencia_agente_conciliacao``: SELECT on the refund ledger's columns, and the
refund's own release statement; sql/grants.sql)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from emitir_reembolso.repository import RefundOrders

_COLUMNS = ("SELECT chave_idempotencia, pedido_id, valor, status, "
            "extract(epoch FROM now() - atualizado_em)::float8 FROM reembolsos ")


@dataclass(frozen=True)
class ErpRow:
    key: str
    order_id: str
    amount: Decimal
    status: str  # reservado | executado | liberado
    age_s: float  # since the row's last change, by the database's clock


class ErpBooks:
    def __init__(self, orders: RefundOrders) -> None:
        self.orders = orders

    def rows(self, *, window_s: int, limit: int) -> list[ErpRow]:
        """Every reservation, and the refunds executed in the last ``window_s`` seconds."""
        found = self.orders.conn.execute(
            _COLUMNS + "WHERE status = 'reservado' OR (status = 'executado' "
            "AND atualizado_em >= now() - make_interval(secs => %s)) ORDER BY atualizado_em LIMIT %s",
            (window_s, limit)).fetchall()
        self.orders.conn.commit()
        return [ErpRow(*row) for row in found]

    def rows_for(self, keys: list[str]) -> dict[str, ErpRow]:
        # Keys may come from the gateway's listing (outside input): a NUL can be in no
        # PostgreSQL text, so such a key has no row (and is never sent to the server).
        keys = [key for key in keys if "\x00" not in key]
        found = self.orders.conn.execute(_COLUMNS + "WHERE chave_idempotencia = ANY(%s)", (keys,)).fetchall()
        self.orders.conn.commit()
        return {row[0]: ErpRow(*row) for row in found}

    def release_unclaimed(self, row: ErpRow, *, min_age_s: int, claim_absent: Callable[[str], bool]) -> bool:
        """Free a reservation no claim holds, under the order's row lock (the lock every
        claim of the order is taken under), re-checking there that no claim exists and
        that the row is still that old reservation. True when it was freed."""
        with self.orders.transaction():
            self.orders.lock_row(row.order_id)
            if not claim_absent(row.key):
                return False
            cur = self.orders.conn.execute(
                "UPDATE reembolsos SET status = 'liberado', atualizado_em = now() WHERE chave_idempotencia = %s "
                "AND status = 'reservado' AND atualizado_em <= now() - make_interval(secs => %s)",
                (row.key, min_age_s))
            return cur.rowcount == 1


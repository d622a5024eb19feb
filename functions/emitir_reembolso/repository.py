"""SQL of the refund tool, run as ``cadencia_agente_reembolso``.

That user may SELECT (id, cliente_id, valor_pedido, valor_reembolsado,
chave_ultimo_reembolso) and UPDATE (status_reembolso, valor_reembolsado,
chave_ultimo_reembolso) on ``pedidos`` and nothing else (sql/grants.sql).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal

import psycopg


@dataclass(frozen=True)
class OrderForRefund:
    id: str
    cliente_id: int
    valor_pedido: Decimal
    valor_reembolsado: Decimal

    @property
    def saldo(self) -> Decimal:
        return self.valor_pedido - self.valor_reembolsado


class RefundOrders:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    @contextmanager
    def locked(self, pedido_id: str) -> Iterator[OrderForRefund | None]:
        """One transaction holding the order's row lock.

        Every refund of an order, from any conversation, serializes on this lock,
        so the balance check and the debit cannot interleave. The lock is held
        across the gateway call, which is bounded by GATEWAY_TIMEOUT_S.
        """
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT id, cliente_id, valor_pedido, valor_reembolsado FROM pedidos WHERE id = %s FOR UPDATE",
                (pedido_id,),
            ).fetchone()
            yield OrderForRefund(*row) if row else None

    def apply_refund(self, *, pedido_id: str, valor: Decimal, chave: str) -> bool:
        """Add the refund to the order, once per idempotency key.

        The key guard makes the write safe to repeat when the ledger could not
        record that it had been done (a crash between COMMIT and the ledger write).
        """
        cur = self.conn.execute(
            """
            UPDATE pedidos
               SET valor_reembolsado = valor_reembolsado + %(valor)s,
                   status_reembolso = CASE WHEN valor_reembolsado + %(valor)s >= valor_pedido
                                           THEN 'reembolsado' ELSE 'reembolsado_parcial' END,
                   chave_ultimo_reembolso = %(chave)s
             WHERE id = %(id)s AND chave_ultimo_reembolso IS DISTINCT FROM %(chave)s
            """,
            {"valor": valor, "chave": chave, "id": pedido_id},
        )
        return cur.rowcount == 1

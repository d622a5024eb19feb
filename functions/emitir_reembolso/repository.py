"""SQL of the refund tool, run as ``cadencia_agente_reembolso``.

That user may read (id, cliente_id, valor_pedido, valor_reembolsado) and update
(status_reembolso, valor_reembolsado) of ``pedidos``, and keep its own rows in
``reembolsos``; nothing else (sql/grants.sql).

Every method runs in the caller's transaction (``transaction()``), so the balance
check and the reservation happen under the order's row lock, and the transition
to *executado* and the ERP update commit together. Every writing method takes the
order's row lock *first*, so all of them lock in the same order (pedidos, then
reembolsos) and can never deadlock each other.
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
    customer_id: int
    order_amount: Decimal
    refunded_amount: Decimal  # what the ERP says was refunded (agent and humans)
    reserved_amount: Decimal  # held by this tool's refunds still in flight (other keys)

    @property
    def balance(self) -> Decimal:
        return self.order_amount - self.refunded_amount - self.reserved_amount


class RefundOrders:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def lock(self, order_id: str, *, key: str) -> OrderForRefund | None:
        """Lock the order row and read its balance. Every refund of an order, from
        any conversation, serializes here, so two balance checks cannot interleave."""
        row = self.conn.execute(
            "SELECT id, cliente_id, valor_pedido, valor_reembolsado FROM pedidos WHERE id = %s FOR UPDATE",
            (order_id,),
        ).fetchone()
        if row is None:
            return None
        reserved = self.conn.execute(
            "SELECT coalesce(sum(valor), 0) FROM reembolsos "
            "WHERE pedido_id = %s AND status = 'reservado' AND chave_idempotencia <> %s",
            (order_id, key),
        ).fetchone()
        assert reserved is not None  # an aggregate without GROUP BY always answers one row
        order, customer, order_amount, refunded_amount = row
        return OrderForRefund(order, customer, order_amount, refunded_amount, reserved_amount=reserved[0])

    def reserve(self, *, key: str, order_id: str, amount: Decimal) -> None:
        """Hold ``amount`` of the order for this key: a new row, a released one again,
        or this key's own stale reservation (its claim failed before the gateway but
        the release did not commit). Never an executed one."""
        cur = self.conn.execute(
            """
            INSERT INTO reembolsos (chave_idempotencia, pedido_id, valor, status)
            VALUES (%(chave)s, %(pedido)s, %(valor)s, 'reservado')
            ON CONFLICT (chave_idempotencia) DO UPDATE
               SET valor = EXCLUDED.valor, status = 'reservado', atualizado_em = now()
             WHERE reembolsos.status IN ('liberado', 'reservado')
            """,
            {"chave": key, "pedido": order_id, "valor": amount},
        )
        if cur.rowcount != 1:
            raise RuntimeError(f"refund {key} is already executed in the ERP")

    def reserved_keys(self, order_id: str, *, excluding: str) -> list[str]:
        """The keys holding a reservation of the order, other than ``excluding``."""
        rows = self.conn.execute(
            "SELECT chave_idempotencia FROM reembolsos WHERE pedido_id = %s AND status = 'reservado' "
            "AND chave_idempotencia <> %s ORDER BY chave_idempotencia",
            (order_id, excluding),
        ).fetchall()
        return [row[0] for row in rows]

    def lock_row(self, order_id: str) -> None:
        """The order's row lock alone (the lock every refund of the order takes first)."""
        self.conn.execute("SELECT 1 FROM pedidos WHERE id = %s FOR UPDATE", (order_id,))

    def release(self, *, key: str, order_id: str) -> None:
        """Nothing was debited for this key: its amount is free again."""
        self.lock_row(order_id)
        self.conn.execute(
            "UPDATE reembolsos SET status = 'liberado', atualizado_em = now() "
            "WHERE chave_idempotencia = %s AND status = 'reservado'",
            (key,),
        )

    def apply_executed(self, *, key: str, order_id: str, amount: Decimal) -> bool:
        """Mark the key executed and add it to the order — once per key, whatever
        happened before (a crash between COMMIT and the ledger flag, a reservation
        that never committed): only the transition to *executado* adds."""
        self.lock_row(order_id)
        cur = self.conn.execute(
            """
            WITH transition AS (
                INSERT INTO reembolsos (chave_idempotencia, pedido_id, valor, status)
                VALUES (%(chave)s, %(pedido)s, %(valor)s, 'executado')
                ON CONFLICT (chave_idempotencia) DO UPDATE
                   SET valor = EXCLUDED.valor, status = 'executado', atualizado_em = now()
                 WHERE reembolsos.status <> 'executado'
                RETURNING pedido_id, valor
            )
            UPDATE pedidos p
               SET valor_reembolsado = p.valor_reembolsado + t.valor,
                   status_reembolso = CASE WHEN p.valor_reembolsado + t.valor >= p.valor_pedido
                                           THEN 'reembolsado' ELSE 'reembolsado_parcial' END
              FROM transition t
             WHERE p.id = t.pedido_id
            """,
            {"chave": key, "pedido": order_id, "valor": amount},
        )
        return cur.rowcount == 1

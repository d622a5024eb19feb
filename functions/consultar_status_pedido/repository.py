"""SQL of the status tool, run as ``cadencia_agente_consulta`` (SELECT only).

The connection is read-only (``db.connection(..., read_only=True)``): autocommit,
so the one SELECT is one round trip with no BEGIN/COMMIT around it, and the
session's ``default_transaction_read_only`` makes the server refuse a write even if
the user's GRANTs were ever widened.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row


def fetch_own_order(conn: psycopg.Connection, *, order_id: str, customer_id: int) -> dict[str, Any] | None:
    # Ownership is part of the WHERE clause: an order of another customer and an
    # order that does not exist are the same empty result.
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            """
            SELECT id, status, valor_pedido, status_reembolso, valor_reembolsado,
                   previsao_entrega, codigo_rastreio
              FROM pedidos
             WHERE id = %s AND cliente_id = %s
            """,
            (order_id, customer_id),
        ).fetchone()

"""SQL of the tracking tool, run as ``cadencia_agente_rastreio`` (SELECT only)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row


def fetch_tracking(conn: psycopg.Connection, *, pedido_id: str, cliente_id: int) -> dict[str, Any] | None:
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT id, codigo_rastreio FROM pedidos WHERE id = %s AND cliente_id = %s",
            (pedido_id, cliente_id),
        ).fetchone()

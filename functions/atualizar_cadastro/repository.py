"""SQL of the profile tool, run as ``cadencia_agente_cadastro``.

That user may UPDATE (endereco, telefone, email) and SELECT (id) on ``clientes``
(the WHERE clause needs ``id``); nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

# The only columns this tool may ever name; the GRANT enforces the same list.
UPDATABLE = ("endereco", "telefone", "email")


def update_own_profile(
    conn: psycopg.Connection, *, customer_id: int, changes: dict[str, str], before_commit: Callable[[], None]
) -> bool:
    """Update the customer's own row; ``before_commit`` runs inside the transaction
    (the audit record), so a failed audit leaves the row unchanged."""
    unknown = set(changes) - set(UPDATABLE)
    if unknown:
        raise ValueError(f"columns not updatable by this tool: {sorted(unknown)}")
    assignments = sql.SQL(", ").join(
        sql.SQL("{} = {}").format(sql.Identifier(col), sql.Placeholder(col)) for col in changes
    )
    with conn.transaction():
        cur = conn.execute(
            sql.SQL("UPDATE clientes SET {} WHERE id = {}").format(assignments, sql.Placeholder("cliente_id")),
            {**changes, "cliente_id": customer_id},
        )
        if cur.rowcount != 1:
            return False
        before_commit()
    return True

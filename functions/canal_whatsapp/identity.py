"""wa_id → clienteId, read from the ERP as ``cadencia_canal_whatsapp``.

That database user may SELECT exactly ``canais_whatsapp (wa_id, cliente_id)``
and nothing else (sql/grants.sql). The binding lives in its own table, written
by the ERP's account flow, not in ``clientes.telefone``: the profile tool may
change ``telefone`` at a customer's request, and identity must never be
something a conversation can rewrite.
"""

from __future__ import annotations

import psycopg

from cadencia_shared import db
from cadencia_shared.catalog import WHATSAPP_DB_USER as DB_USER  # noqa: F401 - the user this module runs as
from cadencia_shared.settings import DatabaseSettings


class ErpCustomerDirectory:
    def __init__(self, settings: DatabaseSettings) -> None:
        self.settings = settings

    def customer_of(self, wa_id: str) -> int | None:
        conn = db.connection(self.settings)
        try:
            with conn.transaction():
                row = conn.execute("SELECT cliente_id FROM canais_whatsapp WHERE wa_id = %s", (wa_id,)).fetchone()
        except psycopg.OperationalError:
            conn.close()  # the next call reconnects (db.connection drops closed connections)
            raise
        return None if row is None else int(row[0])

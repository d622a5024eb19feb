"""wa_id → clienteId, read from the ERP as ``cadencia_canal_whatsapp``.

That database user may SELECT exactly ``canais_whatsapp (wa_id, cliente_id)``
and nothing else (sql/grants.sql). The binding lives in its own table, written
by the ERP's account flow, not in ``clientes.telefone``: the profile tool may
change ``telefone`` at a customer's request, and identity must never be
something a conversation can rewrite.
"""

from __future__ import annotations

from collections.abc import Collection

import psycopg

from cadencia_shared import db
from cadencia_shared.catalog import WHATSAPP_DB_USER as DB_USER  # noqa: F401 - the user this module runs as
from cadencia_shared.settings import DatabaseSettings


class ErpCustomerDirectory:
    def __init__(self, settings: DatabaseSettings) -> None:
        self.settings = settings

    def customers_of(self, wa_ids: Collection[str]) -> dict[str, int]:
        """The customer bound to each number that has one, in ONE query: a webhook may
        carry hundreds of messages, and one round trip each would outlast the function."""
        if not wa_ids:
            return {}
        conn = db.connection(self.settings)
        try:
            with conn.transaction():
                rows = conn.execute("SELECT wa_id, cliente_id FROM canais_whatsapp WHERE wa_id = ANY(%s)",
                                    (sorted(wa_ids),)).fetchall()
        except psycopg.OperationalError:
            conn.close()  # the next call reconnects (db.connection drops closed connections)
            raise
        return {str(wa_id): int(customer_id) for wa_id, customer_id in rows}

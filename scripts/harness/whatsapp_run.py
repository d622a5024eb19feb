"""Lab 87's Figure 2 through the WhatsApp channel (``prova --canal whatsapp``).

Each scenario customer gets a WhatsApp number bound to it in the ERP
(``canais_whatsapp``); each customer message is a signed webhook that goes
through the ingress, the FIFO queue and the orchestrator's queue consumer, and
the turn ends when the fake Cloud API records the reply. The channel derives the
conversation id itself (``wa-{clienteId}-{day}``): every scenario talks on its
own day, so scenarios stay separate conversations as in the direct run, and the
records and debits are reported under the scenario's id to compare the two.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg

from cadencia_shared.ledger import Ledger
from canal_whatsapp.conversation import conversation_id
from scripts.local_stack.whatsapp_channel import LocalChannel
from scripts.local_stack.whatsapp_fake import notification, text_message

from .production import ProductionRunner
from .scenario import Scenario

_FIRST_DAY = datetime(2026, 1, 5, 10, 0, tzinfo=timezone(timedelta(hours=-3)))
REPLY_TIMEOUT_S = 180


def wa_id_of(customer_id: int) -> str:
    return f"55{customer_id:011d}"[-13:]


class WhatsAppRunner:
    def __init__(self, state: Any, ledger: Ledger, model_env: dict[str, str], scenarios: list[Scenario],
                 log_level: str = "WARNING") -> None:
        self.ledger = ledger
        self._records = ProductionRunner(state, ledger, model_env, log_level=log_level)  # reads records back
        self.channel = LocalChannel(state, model_env=model_env, consumers=1, log_level=log_level).__enter__()
        self.day = {sc.conversaId: i for i, sc in enumerate(scenarios)}
        self.channel_ids = {sc.conversaId: conversation_id(sc.clienteId, str(self._ts(sc.conversaId, 0)))
                            for sc in scenarios}
        with psycopg.connect(state.postgres.admin_conninfo(), autocommit=True) as conn:
            for sc in scenarios:
                conn.execute("INSERT INTO canais_whatsapp (wa_id, cliente_id) VALUES (%s, %s) "
                             "ON CONFLICT (wa_id) DO UPDATE SET cliente_id = EXCLUDED.cliente_id",
                             (wa_id_of(sc.clienteId), sc.clienteId))

    def _ts(self, conversation_id: str, index: int) -> int:
        return int((_FIRST_DAY + timedelta(days=self.day[conversation_id], minutes=index)).timestamp())

    def turn(self, conversation_id: str, customer_id: int, index: int, text: str) -> dict[str, Any]:
        number = wa_id_of(customer_id)
        seen = len(self.channel.api.sent_to(number))
        status = self.channel.webhook.post(notification([text_message(number, text,
                                                                       timestamp=self._ts(conversation_id, index))]))
        if status != 200:
            raise RuntimeError(f"the webhook answered {status}")
        if len(self.channel.wait_for_replies(number, seen + 1, REPLY_TIMEOUT_S)) <= seen:
            raise RuntimeError(f"no reply within {REPLY_TIMEOUT_S} s (logs: {self.channel.dir})")
        state = self.ledger.read_conversation(self.channel_ids[conversation_id])
        return {"motivo": "aguardando_humano" if state and state.status.value == "aguardando_humano" else "resposta"}

    def records(self, conversation_id: str) -> list[dict[str, Any]]:
        return [{**r, "conversaId": conversation_id} for r in self._records.records(self.channel_ids[conversation_id])]

    def scenario_debits(self, debits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The gateway's debits with the channel's conversation ids put back to the scenario's."""
        back = {v: k for k, v in self.channel_ids.items()}
        out = []
        for d in debits:
            conv, _, rest = d["idempotencyKey"].partition("#")
            out.append({**d, "idempotencyKey": f"{back.get(conv, conv)}#{rest}"})
        return out

    def close(self) -> None:
        self.channel.__exit__(None, None, None)
        self._records.close()

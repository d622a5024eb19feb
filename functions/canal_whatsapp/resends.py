"""Resending a reply the Cloud API could not take, for as long as the customer's
24-hour window allows.

A send refused for a temporary reason (429, 5xx, a throttling code, a connection
that never opened) after the sender's quick attempts stays ``tentar_de_novo`` in the
outbox, and a message naming it goes on the resend queue (SQS, standard) with a
delay that doubles each time (``DelaySeconds``, at most 15 minutes). The queue's
consumer (the WhatsApp consumer function, a second event source) sends the recorded
reply through the same claim, so a reply is never sent twice; until the window's
end, when the record becomes ``falhou`` (alarmed). Each deferral emits the reply's
age (``IdadeRespostaNaoEnviada``, alarmed), and the queue's own
``ApproximateAgeOfOldestMessage`` is alarmed for a resend that cannot be processed.

A failed enqueue raises: the record stays sendable and the caller's own message
(the inbound one, or the resend) comes back and sends it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, StringConstraints

WINDOW_S = 24 * 3600  # free-form replies only within 24 h of the customer's last message
MAX_DELAY_S = 900  # SQS DelaySeconds' limit
DEFERRED_METRIC = "EnviosWhatsappAdiados"
UNSENT_AGE_METRIC = "IdadeRespostaNaoEnviada"  # seconds since the reply was recorded: alarmed

OutboxKey = Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9._:=+/-]{1,256}\Z")]


class ResendRequest(BaseModel):
    """The body of one resend-queue message: the outbox record to send."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, regex_engine="python-re")

    reenvio: OutboxKey


def delay_s(deferrals: int, base_s: int) -> int:
    """The wait before the ``deferrals``-th resend (1, 2, …): doubling, capped."""
    return min(MAX_DELAY_S, base_s << max(0, min(deferrals - 1, 20)))


class ResendQueue(Protocol):
    def schedule(self, key: str, delay_s: int) -> None: ...


class SqsResendQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def schedule(self, key: str, delay_s: int) -> None:
        self.client.send_message(QueueUrl=self.queue_url, DelaySeconds=max(0, min(MAX_DELAY_S, int(delay_s))),
                                 MessageBody=json.dumps(ResendRequest(reenvio=key).model_dump()))

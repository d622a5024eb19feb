"""The conversation id, derived from the channel (never from message text).

Rule: one conversation per customer per São Paulo calendar day of the message's
own Cloud API ``timestamp``: ``wa-{clienteId}-{AAAAMMDD}``.

- ``clienteId`` is what the sender's ``wa_id`` is bound to in the ERP. The phone
  number itself is personal data and the conversation id reaches logs, audit
  records and the refund key, so the number is never in it.
- The date comes from the message (not from when we received it), so a
  redelivery days later maps to the same conversation and the ledger's inbound
  dedupe (keyed by conversation + wamid) still recognises it.
- A day is short of WhatsApp's 24-hour service window on purpose: a new day is a
  new retry-ceiling scope, and a conversation handed to a human stays with the
  human for the rest of that day.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

# Brazil abolished daylight saving in 2019: São Paulo is UTC-3 all year. A fixed
# offset, because the Lambda runtime is not guaranteed to ship the tz database.
SAO_PAULO = timezone(timedelta(hours=-3), "America/Sao_Paulo")

# The last second whose date Python can hold (9999-12-31T23:59:59Z, 20:59:59 in São
# Paulo). The webhook model refuses a later message timestamp (the message is then
# malformed, answered by code): past it ``conversation_id`` cannot compute a day, and
# an exception in the ingress is a 502 that Meta retries for days.
MAX_MESSAGE_TIMESTAMP = 253402300799


def conversation_id(customer_id: int, message_timestamp: str) -> str:
    day = datetime.fromtimestamp(int(message_timestamp), SAO_PAULO).strftime("%Y%m%d")
    return f"wa-{customer_id}-{day}"

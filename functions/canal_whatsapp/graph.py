"""The Graph API's send endpoint: ``POST /{phone-number-id}/messages``.

Failures are classified by what they say about the message, because that
decides whether sending again could deliver it twice (the Cloud API has no
idempotency key):

- ``NotSent``: nothing reached Meta (connection refused, connect timeout) or Meta
  answered with an error (``retryable`` for throttling/temporary codes);
- ``SendOutcomeUnknown``: the request went out and no answer came back (read
  timeout, reset): it may have been delivered, so it is never sent again;
- ``OutsideServiceWindow``: error 131047, more than 24 h since the customer's
  last message: a free-form text cannot go out at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ProtocolError, ReadTimeoutError

OUTSIDE_WINDOW_CODE = 131047
# Graph/Cloud API codes that mean "temporary, try again": unknown/service errors,
# app and account rate limits, throughput limits, pair rate limit, service unavailable.
RETRYABLE_CODES = frozenset({1, 2, 4, 80007, 130429, 131000, 131016, 131056})


class NotSent(Exception):
    def __init__(self, status: int, code: int | None, retryable: bool) -> None:
        super().__init__(f"Graph API did not send: HTTP {status} code {code}")
        self.status = status
        self.code = code
        self.retryable = retryable


class SendOutcomeUnknown(Exception):
    pass


class OutsideServiceWindow(Exception):
    pass


@dataclass(frozen=True)
class TextReply:
    phone_number_id: str
    to: str  # the customer's wa_id
    body: str
    reply_to: str | None  # the customer's wamid (context.message_id)


class GraphClient:
    def __init__(self, base_url: str, timeout_s: float, *, pool: urllib3.PoolManager | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = urllib3.Timeout(connect=min(2.0, timeout_s), read=timeout_s)
        self.http = pool or urllib3.PoolManager(retries=False)

    def send_text(self, reply: TextReply, access_token: str) -> str:
        """Send one text; returns the message id Meta assigned (``wamid``)."""
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": reply.to,
            "type": "text",
            "text": {"preview_url": False, "body": reply.body},
        }
        if reply.reply_to:
            body["context"] = {"message_id": reply.reply_to}
        try:
            resp = self.http.request(
                "POST", f"{self.base_url}/{reply.phone_number_id}/messages", body=json.dumps(body).encode(),
                headers={"Authorization": f"Bearer {access_token}", "Content-Type": "application/json"},
                timeout=self.timeout, retries=False,
            )
        except (ConnectTimeoutError, NewConnectionError) as err:
            raise NotSent(0, None, retryable=True) from err
        except urllib3.exceptions.MaxRetryError as err:
            if isinstance(err.reason, (ConnectTimeoutError, NewConnectionError)):
                raise NotSent(0, None, retryable=True) from None
            raise SendOutcomeUnknown(type(err.reason).__name__) from None
        except (ReadTimeoutError, ProtocolError) as err:
            raise SendOutcomeUnknown(type(err).__name__) from None
        return _message_id(resp.status, resp.data)


def _message_id(status: int, data: bytes) -> str:
    payload = _json_object(data)
    if 200 <= status < 300:
        return _accepted_message_id(payload)
    code = _error_code(payload)
    if code == OUTSIDE_WINDOW_CODE:
        raise OutsideServiceWindow()
    raise NotSent(status, code, retryable=code in RETRYABLE_CODES or status == 429 or status >= 500)


def _json_object(data: bytes) -> dict[str, Any]:
    """The answer's JSON object; anything else (not JSON, an array, a number) reads as empty."""
    try:
        payload = json.loads(data or b"{}")
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _accepted_message_id(payload: dict[str, Any]) -> str:
    messages = payload.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    if isinstance(first, dict) and first.get("id"):
        return str(first["id"])
    raise SendOutcomeUnknown("2xx without a message id")


def _error_code(payload: dict[str, Any]) -> int | None:
    error = payload.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None

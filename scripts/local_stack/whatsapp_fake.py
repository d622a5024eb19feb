"""A loopback fake of the WhatsApp Cloud API, both directions.

- **Send API** (what the channel calls): ``POST /{version}/{phone-number-id}/messages``
  with a bearer access token; records every accepted message (with its
  ``context.message_id``) and answers like the Graph API (``messages[0].id``).
  Failures can be injected for the next N sends: an HTTP status with a Graph
  error body (``code`` 131047, 130429, …), or a hang past the client's timeout.
- **Webhooks** (what Meta sends us): ``WebhookClient`` builds Cloud API
  notifications, signs them with the test App Secret
  (``X-Hub-Signature-256: sha256=…`` over the exact bytes sent) and posts them to
  the ingress; it can redeliver, reorder and mis-sign on purpose.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.error import HTTPError

from canal_whatsapp.signature import sign

GRAPH_VERSION = "v23.0"
BUSINESS_PHONE_NUMBER_ID = "106540352242922"
BUSINESS_ACCOUNT_ID = "102290129340398"


@dataclass
class SentMessage:
    phone_number_id: str
    to: str
    body: str
    context_message_id: str | None
    id: str
    at: float


@dataclass
class _Injection:
    status: int
    code: int | None
    hang_s: float = 0.0


@dataclass
class FakeCloudApi:
    access_token: str
    sent: list[SentMessage] = field(default_factory=list)
    requests: int = 0
    _injections: list[_Injection] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    # -- injections --------------------------------------------------------------
    def fail_next(self, n: int, *, status: int = 500, code: int | None = 2) -> None:
        with self._lock:
            self._injections.extend(_Injection(status, code) for _ in range(n))

    def hang_next(self, n: int, seconds: float) -> None:
        """Accept the message (it *is* delivered) but answer only after ``seconds``."""
        with self._lock:
            self._injections.extend(_Injection(200, None, seconds) for _ in range(n))

    def reset(self) -> None:
        with self._lock:
            self.sent.clear()
            self._injections.clear()

    def sent_to(self, wa_id: str) -> list[SentMessage]:
        with self._lock:
            return [m for m in self.sent if m.to == wa_id]

    # -- the endpoint ------------------------------------------------------------
    def handle(self, path: str, auth: str | None, body: bytes) -> tuple[int, dict[str, Any], float]:
        parts = path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != GRAPH_VERSION or parts[2] != "messages":
            return 404, _error(100, "Unknown path"), 0.0
        if auth != f"Bearer {self.access_token}":
            return 401, _error(190, "Invalid OAuth access token"), 0.0
        try:
            msg = json.loads(body)
            assert msg["messaging_product"] == "whatsapp" and msg["type"] == "text"
            to, text = str(msg["to"]), str(msg["text"]["body"])
        except (ValueError, KeyError, TypeError, AssertionError):
            return 400, _error(100, "Invalid parameter"), 0.0
        with self._lock:
            self.requests += 1
            injection = self._injections.pop(0) if self._injections else None
            if injection is not None and injection.status != 200:
                return injection.status, _error(injection.code or 1, "injected failure"), 0.0
            message = SentMessage(parts[1], to, text, (msg.get("context") or {}).get("message_id"),
                                  f"wamid.FAKE{next(self._ids):08d}", time.time())
            self.sent.append(message)
        reply = {"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}],
                 "messages": [{"id": message.id}]}
        return 200, reply, injection.hang_s if injection else 0.0


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"message": f"(#{code}) {message}", "type": "OAuthException", "code": code,
                      "error_data": {"messaging_product": "whatsapp", "details": message},
                      "fbtrace_id": "AFakeTraceId"}}


class FakeCloudApiServer:
    """The fake's send endpoint on 127.0.0.1 (a thread of the caller's process)."""

    def __init__(self, api: FakeCloudApi) -> None:
        self.api = api

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer, hang_s = api.handle(self.path, self.headers.get("Authorization"), body)
                if hang_s:
                    time.sleep(hang_s)
                raw = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (an injected hang)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def graph_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/{GRAPH_VERSION}"

    def __enter__(self) -> FakeCloudApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


# -- webhooks ----------------------------------------------------------------------
_wamids = itertools.count(1)


def new_wamid() -> str:
    return f"wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFDNBRkFLRT{next(_wamids):06d}{time.time_ns() % 10**6:06d}AA=="


def text_message(wa_id: str, text: str, *, wamid: str | None = None, timestamp: int | None = None) -> dict[str, Any]:
    return {"from": wa_id, "id": wamid or new_wamid(), "timestamp": str(timestamp or int(time.time())),
            "type": "text", "text": {"body": text}}


def media_message(wa_id: str, kind: str = "image") -> dict[str, Any]:
    return {"from": wa_id, "id": new_wamid(), "timestamp": str(int(time.time())), "type": kind,
            kind: {"id": "1234567890", "mime_type": "image/jpeg", "sha256": "abc"}}


def notification(messages: list[dict[str, Any]], *, statuses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "5511900000000", "phone_number_id": BUSINESS_PHONE_NUMBER_ID},
        "contacts": [{"profile": {"name": "Cliente"}, "wa_id": m["from"]} for m in messages],
        "messages": messages,
    }
    if statuses:
        value["statuses"] = statuses
    return {"object": "whatsapp_business_account",
            "entry": [{"id": BUSINESS_ACCOUNT_ID, "changes": [{"field": "messages", "value": value}]}]}


@dataclass
class WebhookClient:
    """Posts signed notifications to the ingress, the way Meta does."""

    ingress_url: str
    app_secret: str

    def post_raw(self, body: bytes, signature: str | None) -> int:
        headers = {"Content-Type": "application/json"}
        if signature is not None:
            headers["X-Hub-Signature-256"] = signature
        request = urllib.request.Request(self.ingress_url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status
        except HTTPError as err:
            return err.code

    def post(self, payload: dict[str, Any], *, secret: str | None = None) -> int:
        body = json.dumps(payload, separators=(",", ":")).encode()
        return self.post_raw(body, sign(body, secret if secret is not None else self.app_secret))

    def send_text(self, wa_id: str, text: str, **kwargs: Any) -> tuple[int, str]:
        message = text_message(wa_id, text, **kwargs)
        return self.post(notification([message])), message["id"]

    def handshake(self, mode: str, token: str, challenge: str) -> tuple[int, str]:
        query = urllib.parse.urlencode({"hub.mode": mode, "hub.verify_token": token, "hub.challenge": challenge})
        try:
            with urllib.request.urlopen(f"{self.ingress_url}?{query}", timeout=10) as resp:
                return resp.status, resp.read().decode()
        except HTTPError as err:
            return err.code, ""


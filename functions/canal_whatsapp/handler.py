"""Lambda entry point of the webhook (a Function URL; thin: parse, wire, answer).

Why a Function URL and not an API Gateway HTTP API: the webhook is one route
authenticated by its own HMAC signature, so API Gateway's authorizers, stages and
routing add cost and a hop without adding a check; a Function URL with
``AuthType NONE`` hands the raw body to the code that verifies it. Throttling is
the function's reserved concurrency (set by the stack).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cadencia_shared.aws import client
from cadencia_shared.handler import InvalidEvent, parse_event
from cadencia_shared.observability import logger_for
from cadencia_shared.settings import DatabaseSettings

from .adapters import SecretsManagerChannelSecrets, SqsFifoQueue
from .identity import ErpCustomerDirectory
from .ingress import HttpRequest, Ingress, reject
from .models import FunctionUrlEvent
from .settings import IngressSettings

logger = logger_for("canal_whatsapp")

_built: dict[str, Ingress] = {}


def ingress() -> Ingress:
    settings = IngressSettings.from_env()
    key = settings.model_dump_json()
    if key not in _built:
        _built[key] = Ingress(
            directory=ErpCustomerDirectory(DatabaseSettings.from_env()),
            queue=SqsFifoQueue(client("sqs", settings.aws), settings.queue_url),
            secrets=SecretsManagerChannelSecrets(client("secretsmanager", settings.aws),
                                                 app_secret_name=settings.app_secret_name,
                                                 verify_token_name=settings.verify_token_name,
                                                 queue_key_name=settings.queue_key_name),
            max_body_bytes=settings.max_body_bytes,
        )
    return _built[key]


def reset() -> None:
    _built.clear()


def raw_body(event: FunctionUrlEvent) -> bytes:
    """The bytes Meta signed: base64-decoded when Lambda encoded them, otherwise the
    UTF-8 of the body string (Lambda passes text bodies through unchanged)."""
    body = event.body or ""
    if not event.isBase64Encoded:
        return body.encode("utf-8")
    try:
        return base64.b64decode(body, validate=True)
    except binascii.Error:
        return b""  # no signature matches it: answered 401


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        url_event = parse_event(event, FunctionUrlEvent)  # strict, like every Lambda edge
    except InvalidEvent as err:
        # Not a Function URL event: nothing is read, checked or enqueued.
        logger.info("invalid event", extra={"erros": err.problems})
        response = reject(400, "evento")
    else:
        request = HttpRequest(
            method=url_event.requestContext.http.method.upper(),
            body=raw_body(url_event),
            headers={k.lower(): v for k, v in (url_event.headers or {}).items()},
            query=dict(url_event.queryStringParameters or {}),
        )
        response = ingress().handle(request)
        # Ids and outcomes only: never the body, the sender or the headers.
        logger.info("webhook answered", extra={"metodo": request.method, "status": response.status})
    return {"statusCode": response.status, "headers": {"Content-Type": "text/plain"}, "body": response.body}

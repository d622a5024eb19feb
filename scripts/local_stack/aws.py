"""moto in server mode, with every request serialized.

Why the lock: DynamoDB applies each request atomically, so a conditional write
(``attribute_not_exists``, ``ADD`` on a counter) can never be won twice. moto's
server handles requests on several threads without that guarantee; measured on
this project, 2 of 30 racing rounds let two ``attribute_not_exists`` PutItems
both succeed. One lock around the WSGI app restores per-request atomicity, so the
race tests exercise the same guarantee the real service gives. (moto cannot
prove IAM resource scoping either; that is proven on the synthesized template.)
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import boto3
from botocore.config import Config
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from cadencia_shared.audit_chain import AUDIT_TABLE
from cadencia_shared.audit_chain import table_definition as audit_table_definition
from cadencia_shared.catalog import HANDOFF_BUS_NAME, HANDOFF_EVENT_SOURCE, HANDOFF_QUEUE_NAME
from cadencia_shared.ledger import TTL_ATTRIBUTE, table_definition

LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
REGION = "us-east-1"


class SerializedWsgi:
    """Runs one request at a time and materializes the body inside the lock.

    It also gives DynamoDB's ``TransactWriteItems`` its ``ClientRequestToken``
    idempotency, which moto ignores: botocore fills the token once per call and
    re-sends it on each retry, so a transaction applied whose answer was lost (a
    read timeout under load) succeeds again on the retry instead of failing its
    own conditions. Same token and same request within 10 minutes → the first
    answer, nothing applied; same token, other request → IdempotentParameterMismatch.
    """

    TOKEN_WINDOW_S = 600
    TRANSACT_TARGET = "DynamoDB_20120810.TransactWriteItems"
    RECEIVE_TARGET = "AmazonSQS.ReceiveMessage"
    POLL_EVERY_S = 0.05

    def __init__(self, app: Callable[..., Iterable[bytes]], clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.requests = 0
        self.clock = clock
        self._tokens: dict[str, tuple[float, bytes, str, list[tuple[str, str]], bytes]] = {}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("HTTP_X_AMZ_TARGET") == self.RECEIVE_TARGET:
            return self._long_poll(environ, start_response)
        with self.lock:
            self.requests += 1
            if environ.get("HTTP_X_AMZ_TARGET") == self.TRANSACT_TARGET:
                return self._transaction(environ, start_response)
            return self._run(environ, start_response)

    def _long_poll(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """An SQS long poll, as short polls with the lock released in between.

        moto waits out ``WaitTimeSeconds`` inside the request; under the one lock that
        wait stalled every other request (each idle consumer's 1-second poll in turn),
        so a DynamoDB write could wait several seconds — past the clients' 5 s read
        timeout, which real DynamoDB never approaches."""
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        try:
            request = json.loads(body)
            wait = request.get("WaitTimeSeconds")
        except (ValueError, AttributeError):
            request, wait = None, None
        if isinstance(wait, int) and not isinstance(wait, bool) and wait > 0:
            body = json.dumps({**request, "WaitTimeSeconds": 0}).encode()
        else:
            wait = 0
        deadline = self.clock() + wait
        while True:
            seen: list[Any] = []
            attempt = {**environ, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
            with self.lock:
                self.requests += 1
                answer = b"".join(self._run(attempt, lambda status, headers, *exc: seen.append((status, headers))))  # noqa: B023
            if not seen[0][0].startswith("200") or b'"Messages"' in answer or self.clock() >= deadline:
                start_response(*seen[0])
                return [answer]
            time.sleep(self.POLL_EVERY_S)

    def _run(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        result = self.app(environ, start_response)
        try:
            return list(result)
        finally:
            close = getattr(result, "close", None)
            if close:
                close()

    def _transaction(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            token = json.loads(body).get("ClientRequestToken")
        except (ValueError, AttributeError):
            token = None
        now = self.clock()
        self._tokens = {k: v for k, v in self._tokens.items() if now - v[0] < self.TOKEN_WINDOW_S}
        if isinstance(token, str) and token in self._tokens:
            _, first_body, status, headers, answer = self._tokens[token]
            if first_body != body:
                return self._mismatch(start_response)
            start_response(status, headers)
            return [answer]
        seen: list[Any] = []

        def remember(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            seen[:] = [status, list(headers)]
            return start_response(status, headers, *exc)

        out = self._run(environ, remember)
        if isinstance(token, str) and seen and seen[0].startswith("200"):
            self._tokens[token] = (now, body, seen[0], seen[1], b"".join(out))
        return out

    @staticmethod
    def _mismatch(start_response: Callable[..., Any]) -> list[bytes]:
        answer = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
                             "message": "ClientRequestToken was used with different request parameters"}).encode()
        start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.0"),
                                           ("Content-Length", str(len(answer)))])
        return [answer]


def make_moto_server(host: str = "127.0.0.1", port: int = 0) -> BaseWSGIServer:
    app = SerializedWsgi(DomainDispatcherApplication(create_backend_app))
    return make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)


def session_client(service: str, endpoint: str) -> Any:
    return boto3.session.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=REGION,
    ).client(service, endpoint_url=endpoint, config=Config(max_pool_connections=64))


def provision(endpoint: str, *, table_name: str, secret_name: str, gateway_token: str) -> None:
    """Create the ledger table (with its TTL) and the gateway secret; idempotent."""
    ddb = session_client("dynamodb", endpoint)
    if table_name not in ddb.list_tables()["TableNames"]:
        reset_ledger(ddb, table_name)
    provision_handoffs(session_client("events", endpoint), session_client("sqs", endpoint))
    sm = session_client("secretsmanager", endpoint)
    value = json.dumps({"token": gateway_token})
    try:
        sm.create_secret(Name=secret_name, SecretString=value)
    except sm.exceptions.ResourceExistsException:
        sm.put_secret_value(SecretId=secret_name, SecretString=value)


def provision_handoffs(events: Any, sqs: Any) -> str:
    """The hand-off bus, its queue and the default rule between them (as the CDK
    stack's infra/handoffs.py); idempotent. Returns the queue's URL."""
    if HANDOFF_BUS_NAME not in {b["Name"] for b in events.list_event_buses()["EventBuses"]}:
        events.create_event_bus(Name=HANDOFF_BUS_NAME)
    queue_url = sqs.create_queue(QueueName=HANDOFF_QUEUE_NAME)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="encaminhamentos-para-fila", EventBusName=HANDOFF_BUS_NAME,
                    EventPattern=json.dumps({"source": [HANDOFF_EVENT_SOURCE]}))
    events.put_targets(Rule="encaminhamentos-para-fila", EventBusName=HANDOFF_BUS_NAME,
                       Targets=[{"Id": "fila", "Arn": arn}])
    return queue_url


def reset_ledger(ddb: Any, table_name: str) -> None:
    """Local stack only: drop and recreate the ledger — and the audit table, whose
    chains are about the ledger's conversations — so a harness run starts empty."""
    for name in (table_name, AUDIT_TABLE):
        if name in ddb.list_tables()["TableNames"]:
            ddb.delete_table(TableName=name)
            ddb.get_waiter("table_not_exists").wait(TableName=name)
    ddb.create_table(**audit_table_definition(AUDIT_TABLE))
    ddb.create_table(**table_definition(table_name))
    ddb.get_waiter("table_exists").wait(TableName=table_name)
    ddb.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )



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

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

import boto3
from botocore.config import Config
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from cadencia_shared.catalog import HANDOFF_BUS_NAME, HANDOFF_EVENT_SOURCE, HANDOFF_QUEUE_NAME
from cadencia_shared.audit_chain import AUDIT_TABLE
from cadencia_shared.audit_chain import table_definition as audit_table_definition
from cadencia_shared.ledger import TTL_ATTRIBUTE, table_definition

LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
REGION = "us-east-1"


class SerializedWsgi:
    """Runs one request at a time and materializes the body inside the lock."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.requests = 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            self.requests += 1
            result = self.app(environ, start_response)
            try:
                return list(result)
            finally:
                close = getattr(result, "close", None)
                if close:
                    close()


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



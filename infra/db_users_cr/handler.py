"""Custom resource: the three database users and their GRANTs in CloudFormation state.

Create/Update run ``Statements`` (sql/schema.sql + sql/grants.sql, split at synth
time, one statement per call because the RDS Data API executes one statement per
``ExecuteStatement``); Delete runs ``RevokeStatements`` (sql/revoke.sql). Every
script is idempotent, so a retried or repeated event converges to the same state.

The physical id never changes: CloudFormation treats a new physical id on Update as
a replacement and sends Delete for the old one, which here would drop the users
that the update had just granted.

No dependencies beyond the runtime's boto3; the response goes to CloudFormation's
pre-signed URL with urllib. Whatever happens, a response is sent, so a bug fails
the deployment instead of leaving it waiting for an hour.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger()
logger.setLevel(logging.INFO)

PHYSICAL_ID = "cadencia-db-users"
# An auto-paused Aurora Serverless v2 cluster answers DatabaseResumingException
# while it wakes up (about 15 s); wait for it instead of failing the deploy.
RETRYABLE = {"DatabaseResumingException", "ServiceUnavailableError", "ThrottlingException"}
# On Delete, a cluster that is already gone has no users left to revoke.
GONE_ON_DELETE = {"DatabaseNotFoundException", "ResourceNotFoundException"}

Execute = Callable[[str], Any]


class StatementFailed(Exception):
    pass


def _error_code(err: Exception) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def run_statements(
    statements: Sequence[str],
    execute: Execute,
    *,
    deadline_s: float = 240.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Execute ``statements`` in order, retrying only while the cluster resumes."""
    started = clock()
    for index, statement in enumerate(statements, 1):
        delay = 2.0
        while True:
            try:
                execute(statement)
                break
            except Exception as err:  # noqa: BLE001 - classified below
                code = _error_code(err)
                if code in RETRYABLE and clock() - started + delay < deadline_s:
                    logger.info("statement %d/%d: %s, retrying in %.0fs", index, len(statements), code, delay)
                    sleep(delay)
                    delay = min(delay * 2, 20.0)
                    continue
                first_line = statement.strip().splitlines()[0][:80]
                raise StatementFailed(f"statement {index}/{len(statements)} ({first_line}...): {code or err}") from err
        logger.info("statement %d/%d done", index, len(statements))
    return len(statements)


def data_api_executor(props: dict[str, Any], client: Any = None) -> Execute:
    if client is None:
        import boto3

        client = boto3.client("rds-data")

    def execute(sql: str) -> Any:
        return client.execute_statement(
            resourceArn=props["ResourceArn"], secretArn=props["SecretArn"], database=props["Database"], sql=sql
        )

    return execute


def handle(event: dict[str, Any], execute: Execute) -> dict[str, Any]:
    """The outcome of one custom-resource event (without sending it)."""
    props = event["ResourceProperties"]
    request = event["RequestType"]
    if request in ("Create", "Update"):
        count = run_statements(props["Statements"], execute)
        return {"Status": "SUCCESS", "PhysicalResourceId": PHYSICAL_ID, "Data": {"Statements": count}}
    if request == "Delete":
        try:
            count = run_statements(props["RevokeStatements"], execute)
        except StatementFailed as err:
            if _error_code(err.__cause__) in GONE_ON_DELETE:  # type: ignore[arg-type]
                logger.info("cluster already gone: nothing to revoke")
                count = 0
            else:
                raise
        return {"Status": "SUCCESS", "PhysicalResourceId": event.get("PhysicalResourceId", PHYSICAL_ID),
                "Data": {"Statements": count}}
    raise ValueError(f"unknown RequestType {request!r}")


def send(event: dict[str, Any], outcome: dict[str, Any], context: Any) -> None:
    body = json.dumps({
        "Status": outcome["Status"],
        "Reason": outcome.get("Reason", "")[:3000] or f"see log stream {getattr(context, 'log_stream_name', '?')}",
        "PhysicalResourceId": outcome["PhysicalResourceId"],
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": outcome.get("Data", {}),
    }).encode()
    request = urllib.request.Request(
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - CloudFormation's pre-signed URL
        logger.info("response sent: %s %s", outcome["Status"], response.status)


def on_event(event: dict[str, Any], context: Any) -> None:
    # The SQL is DDL without secrets, but the event also carries ARNs: log the type only.
    logger.info("%s %s", event.get("RequestType"), event.get("LogicalResourceId"))
    try:
        outcome = handle(event, data_api_executor(event["ResourceProperties"]))
    except Exception as err:  # noqa: BLE001 - any failure becomes a FAILED response
        logger.exception("failed")
        outcome = {"Status": "FAILED", "Reason": f"{type(err).__name__}: {err}",
                   "PhysicalResourceId": event.get("PhysicalResourceId", PHYSICAL_ID)}
    send(event, outcome, context)

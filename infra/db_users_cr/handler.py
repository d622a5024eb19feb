"""Custom resource: the three database users and their GRANTs in CloudFormation state.

The SQL is NOT in the event. At synth time the stack splits the repository's own
``sql/`` files into single statements (the RDS Data API runs one statement per
``ExecuteStatement``) and writes them into this function's asset as
``statements.json``; the event only names their SHA-256 (``SqlSha256``), which must
equal the digest of the file the function ships. Create/Update run the ``apply``
list (schema.sql + grants.sql [+ demo.sql]); Delete runs ``revoke`` (revoke.sql).
Every script is idempotent, so a repeated event converges to the same state.

Who it answers: only this stack (``StackId`` equals the stack it was deployed by,
``LogicalResourceId`` is the one resource it serves), only while CloudFormation is
actually working on that resource (DescribeStackResource), and only through a
CloudFormation pre-signed response URL of this region (https, the
``cloudformation-custom-resource-response-<region without dashes>`` S3 bucket).
Create/Update run while the resource is ``*_IN_PROGRESS`` but not being deleted;
a Delete only while CloudFormation deletes it: the resource ``DELETE_IN_PROGRESS``,
or a failed create (``CREATE_FAILED``) while the stack is in a state that deletes it
(``DELETING_STACK``, read with DescribeStacks). An invocation outside a stack
operation changes nothing. Which cluster and secret it uses come from its
environment, never from the event.

A Delete whose revoke fails answers SUCCESS (saying so) when the resource never
finished creating or the stack is rolling back its first creation: the same
rollback deletes the cluster, and a FAILED answer would leave the stack in
ROLLBACK_FAILED. Anywhere else (``cdk destroy``, the teardown's update) it answers
FAILED, so the teardown's check sees it.

Exactly one answer per envelope that can be answered: whatever fails after the
envelope names a valid response URL, stack, request and resource is reported as
FAILED once; an envelope without those has nobody to answer, and is refused in
the log (the function never raises, so Lambda's asynchronous retries never send a
second, different answer).

Standard library + the runtime's boto3 only: pydantic would have to be bundled
for three string checks, and this function must stay small enough to audit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger()
logger.setLevel(logging.INFO)

PHYSICAL_ID = "cadencia-db-users"
STATEMENTS_FILE = Path(__file__).resolve().parent / "statements.json"
# An auto-paused Aurora Serverless v2 cluster answers DatabaseResumingException
# while it wakes up (about 15 s); wait for it instead of failing the deploy.
RETRYABLE = {"DatabaseResumingException", "ServiceUnavailableError", "ThrottlingException"}
# On Delete, a cluster that is already gone has no users left to revoke.
GONE_ON_DELETE = {"DatabaseNotFoundException", "ResourceNotFoundException"}
REQUEST_TYPES = ("Create", "Update", "Delete")
_SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")
_MAX_FIELD = 2048

# What CloudFormation passes in ResourceProperties (every value a string): the
# function's ARN, the template's ServiceTimeout (seconds, 1..3600) and the SQL digest.
PROPERTIES = ("ServiceToken", "ServiceTimeout", "SqlSha256")
_SERVICE_TIMEOUT = re.compile(r"\A[1-9][0-9]{0,3}\Z")
_MAX_SERVICE_TIMEOUT = 3600
# Stack states in which CloudFormation deletes a resource that failed to create:
# the rollback of a failed stack creation, of a failed update (new resources go in
# its cleanup), and deleting the stack.
DELETING_STACK = ("ROLLBACK_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS",
                  "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "DELETE_IN_PROGRESS")

Execute = Callable[[str], Any]
StackStatus = Callable[[str, str], str]  # (stack id, logical id) -> the resource's status
StackState = Callable[[str], str]  # stack id -> the stack's status


class StatementFailed(Exception):
    pass


class Refused(Exception):
    """The envelope is not a genuine request for this resource: nothing runs."""


def _error_code(err: BaseException | None) -> str:
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
    if isinstance(statements, (str, bytes)) or not all(isinstance(s, str) for s in statements):
        raise TypeError("statements must be a list of strings")  # a str would run one character at a time
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
                first_line = statement.strip().splitlines()[0][:80] if statement.strip() else ""
                raise StatementFailed(f"statement {index}/{len(statements)} ({first_line}...): {code or err}") from err
        logger.info("statement %d/%d done", index, len(statements))
    return len(statements)


# --- what the function ships ---------------------------------------------------


def load_statements(path: Path = STATEMENTS_FILE) -> tuple[dict[str, list[str]], str]:
    raw = path.read_bytes()
    bundle = json.loads(raw)
    if not (isinstance(bundle, dict) and set(bundle) == {"apply", "revoke"}
            and all(isinstance(v, list) and all(isinstance(s, str) for s in v) for v in bundle.values())):
        raise ValueError(f"{path.name}: expected {{'apply': [str], 'revoke': [str]}}")
    return bundle, hashlib.sha256(raw).hexdigest()


# --- the envelope --------------------------------------------------------------


def response_url_is_cloudformations(url: str, region: str) -> bool:
    """https://cloudformation-custom-resource-response-<region without dashes>.s3[.-<region>].amazonaws.com/...?..."""
    parts = urllib.parse.urlsplit(url)
    bucket = re.escape(f"cloudformation-custom-resource-response-{region.replace('-', '')}")
    host = re.compile(rf"\A{bucket}\.s3(?:[.-]{re.escape(region)})?\.amazonaws\.com\Z")
    return (parts.scheme == "https" and parts.port in (None, 443) and not parts.username and not parts.password
            and bool(host.match(parts.hostname or "")) and bool(parts.query) and len(url) <= _MAX_FIELD)


def answerable(event: Any, env: dict[str, str]) -> tuple[str, dict[str, str]] | None:
    """(response URL, echo fields) when the envelope can be answered at all, else None."""
    if not isinstance(event, dict):
        return None
    fields = {k: event.get(k) for k in ("StackId", "RequestId", "LogicalResourceId")}
    url = event.get("ResponseURL")
    if not isinstance(url, str) or not all(isinstance(v, str) and 0 < len(v) <= _MAX_FIELD
                                           for v in (url, *fields.values())):
        return None
    if not response_url_is_cloudformations(url, env["AWS_REGION"]):
        return None
    if fields["StackId"] != env["STACK_ID"] or fields["LogicalResourceId"] != env["LOGICAL_RESOURCE_ID"]:
        return None  # not this stack's resource: its URL is not ours to write to
    return url, {k: v for k, v in fields.items() if isinstance(v, str)}  # all of them (checked above)


def check_properties(props: Any, *, name: str = "ResourceProperties") -> str:
    """The SQL digest, once ``props`` holds only what CloudFormation passes (never SQL)."""
    if not isinstance(props, dict) or set(props) - set(PROPERTIES):
        raise Refused(f"{name} may hold only {', '.join(PROPERTIES)} (never SQL)")
    timeout = props.get("ServiceTimeout")
    if timeout is not None and not (isinstance(timeout, str) and _SERVICE_TIMEOUT.match(timeout)
                                    and int(timeout) <= _MAX_SERVICE_TIMEOUT):
        raise Refused(f"{name}: ServiceTimeout must be 1..{_MAX_SERVICE_TIMEOUT} seconds, as a string")
    requested = props.get("SqlSha256")
    if not (isinstance(requested, str) and _SHA256.match(requested)):
        raise Refused(f"{name}: SqlSha256 must be 64 lowercase hex digits")
    return requested


def check_request(event: dict[str, Any], digest: str, stack_status: StackStatus,
                  stack_state: StackState) -> tuple[str, str]:
    """The request type and the resource's status, once the envelope is proven to be a
    live request for the shipped SQL."""
    request = event.get("RequestType")
    if request not in REQUEST_TYPES:
        raise Refused(f"RequestType must be one of {REQUEST_TYPES}")
    requested = check_properties(event.get("ResourceProperties"))
    old = check_properties(event.get("OldResourceProperties"), name="OldResourceProperties") \
        if request == "Update" else None
    status = stack_status(event["StackId"], event["LogicalResourceId"])
    if request == "Delete":
        if not _being_deleted(status, lambda: stack_state(event["StackId"])):
            raise Refused(f"CloudFormation is not deleting this resource (status {status})")
    elif not status.endswith("_IN_PROGRESS") or status == "DELETE_IN_PROGRESS":
        raise Refused(f"CloudFormation is not creating or updating this resource (status {status})")
    if request != "Delete" and requested != digest and old != digest:
        raise Refused(f"SqlSha256 {requested[:12]}… is not the SQL this function ships ({digest[:12]}…)")
    return request, status


def _being_deleted(status: str, stack: Callable[[], str]) -> bool:
    """DELETE_IN_PROGRESS, or a failed create that the stack's current operation deletes."""
    return status == "DELETE_IN_PROGRESS" or (status == "CREATE_FAILED" and stack() in DELETING_STACK)


def _revoke_failure_is_harmless(status: str, stack: Callable[[], str]) -> bool:
    """The resource never finished creating, or the stack's first creation is rolling
    back: either way the rollback deletes the cluster with the users."""
    try:
        return status == "CREATE_FAILED" or stack() == "ROLLBACK_IN_PROGRESS"
    except Exception as err:  # noqa: BLE001 - unknown: report the failure
        logger.error("stack status unavailable: %s", type(err).__name__)
        return False


# --- the work ------------------------------------------------------------------


def handle(event: dict[str, Any], execute: Execute, *, bundle: dict[str, list[str]], digest: str,
           stack_status: StackStatus, stack_state: StackState) -> dict[str, Any]:
    """The outcome of one checked custom-resource event (without sending it)."""
    request, status = check_request(event, digest, stack_status, stack_state)
    physical_id = event.get("PhysicalResourceId") if request != "Create" else PHYSICAL_ID
    physical_id = physical_id if isinstance(physical_id, str) and physical_id else PHYSICAL_ID
    if request == "Update" and event["ResourceProperties"]["SqlSha256"] != digest:
        # A rollback to SQL this code no longer ships: the database keeps the grants
        # of the update (which did apply); the next deploy converges them. Failing
        # here would leave the stack in UPDATE_ROLLBACK_FAILED.
        return {"Status": "SUCCESS", "PhysicalResourceId": physical_id, "Data": {"Statements": 0},
                "Reason": f"rollback: database left at SQL {digest[:12]}"}
    if request in ("Create", "Update"):
        count = run_statements(bundle["apply"], execute)
        return {"Status": "SUCCESS", "PhysicalResourceId": physical_id, "Data": {"Statements": count}}
    try:
        count = run_statements(bundle["revoke"], execute)
    except StatementFailed as err:
        if _error_code(err.__cause__) in GONE_ON_DELETE:
            logger.info("cluster already gone: nothing to revoke")
            count = 0
        elif _revoke_failure_is_harmless(status, lambda: stack_state(event["StackId"])):
            logger.error("rollback: revoke failed (%s); the rollback deletes the cluster", str(err)[:300])
            return {"Status": "SUCCESS", "PhysicalResourceId": physical_id, "Data": {"Statements": 0},
                    "Reason": f"rollback of a failed create: revoke failed ({str(err)[:300]}); the cluster "
                              "is deleted by the same rollback"}
        else:
            raise
    return {"Status": "SUCCESS", "PhysicalResourceId": physical_id, "Data": {"Statements": count}}


def data_api_executor(env: dict[str, str], client: Any = None) -> Execute:
    if client is None:
        import boto3

        client = boto3.client("rds-data")

    def execute(sql: str) -> Any:
        return client.execute_statement(
            resourceArn=env["CLUSTER_ARN"], secretArn=env["SECRET_ARN"], database=env["DATABASE"], sql=sql
        )

    return execute


def cloudformation_status(client: Any = None) -> StackStatus:
    if client is None:
        import boto3

        client = boto3.client("cloudformation")

    def status(stack_id: str, logical_id: str) -> str:
        detail = client.describe_stack_resource(StackName=stack_id, LogicalResourceId=logical_id)
        return str(detail["StackResourceDetail"]["ResourceStatus"])

    return status


def cloudformation_stack_state(client: Any = None) -> StackState:
    if client is None:
        import boto3

        client = boto3.client("cloudformation")

    def state(stack_id: str) -> str:
        (stack,) = client.describe_stacks(StackName=stack_id)["Stacks"]
        return str(stack["StackStatus"])

    return state


def send(url: str, fields: dict[str, str], outcome: dict[str, Any], context: Any, *, attempts: int = 3) -> None:
    body = json.dumps({
        "Status": outcome["Status"],
        "Reason": outcome.get("Reason", "")[:1000] or f"see log stream {getattr(context, 'log_stream_name', '?')}",
        "PhysicalResourceId": outcome["PhysicalResourceId"],
        **fields,
        "Data": outcome.get("Data", {}),
    }).encode()
    for attempt in range(1, attempts + 1):
        # The same body each time: a PUT to the pre-signed object is idempotent, so a
        # retry after a transport error is still one answer.
        request = urllib.request.Request(url, data=body, method="PUT",
                                         headers={"Content-Type": "", "Content-Length": str(len(body))})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - validated above
                logger.info("response sent: %s %s", outcome["Status"], response.status)
                return
        except (urllib.error.URLError, OSError) as err:
            logger.warning("response attempt %d/%d failed: %s", attempt, attempts, type(err).__name__)
            if attempt < attempts:
                time.sleep(2 * attempt)


def process(event: Any, context: Any, env: dict[str, str], *, execute: Execute, stack_status: StackStatus,
            stack_state: StackState, statements_file: Path = STATEMENTS_FILE) -> dict[str, Any] | None:
    """Check, run and answer one event; returns the outcome sent (None when nobody can be answered)."""
    target = answerable(event, env)
    if target is None:
        logger.error("refused: not an answerable CloudFormation request for this resource; nothing ran")
        return None
    url, fields = target
    try:
        bundle, digest = load_statements(statements_file)
        outcome = handle(event, execute, bundle=bundle, digest=digest, stack_status=stack_status,
                         stack_state=stack_state)
    except Exception as err:  # noqa: BLE001 - any failure becomes the one FAILED answer
        logger.error("failed: %s: %s", type(err).__name__, str(err)[:500])
        physical_id = event.get("PhysicalResourceId")
        outcome = {"Status": "FAILED", "Reason": f"{type(err).__name__}: {str(err)[:900]}",
                   "PhysicalResourceId": physical_id if isinstance(physical_id, str) and physical_id else PHYSICAL_ID}
    send(url, fields, outcome, context)
    return outcome


def on_event(event: Any, context: Any) -> None:
    # The event carries no secrets, but log only its type: never the URL's signature.
    # Both values come from the caller before any check: repr-quoted (no forged
    # lines) and clipped (no megabyte log line).
    logger.info("%.100r %.100r", event.get("RequestType") if isinstance(event, dict) else type(event).__name__,
                event.get("LogicalResourceId") if isinstance(event, dict) else "")
    env = {k: os.environ.get(k, "") for k in ("AWS_REGION", "STACK_ID", "LOGICAL_RESOURCE_ID", "CLUSTER_ARN",
                                              "SECRET_ARN", "DATABASE")}
    try:
        execute, stack_status, stack_state = data_api_executor(env), cloudformation_status(), \
            cloudformation_stack_state()
    except Exception as err:  # noqa: BLE001 - still answer once
        logger.error("clients unavailable: %s", type(err).__name__)
        execute, stack_status, stack_state = _failing(err), _failing(err), _failing(err)
    process(event, context, env, execute=execute, stack_status=stack_status, stack_state=stack_state)


def _failing(err: Exception) -> Callable[..., Any]:
    def fail(*_: Any) -> Any:
        raise err

    return fail

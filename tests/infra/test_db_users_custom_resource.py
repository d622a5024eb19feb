"""The DB-users custom resource handler (infra/db_users_cr/handler.py).

Its Data API calls are replaced by the same statements run on a real PostgreSQL
as an RDS-style master (not a superuser), one per call; the statements are the
ones the stack ships in the function's asset. The HTTP answer is sent to a real
loopback server; the decision of whether and what to answer is tested on
``process`` with hostile envelopes (hypothesis).
"""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.catalog import TOOLS
from infra import db_users
from infra.contract import Ids

from . import cr_events

spec = importlib.util.spec_from_file_location("db_users_handler", db_users.HANDLER_DIR / "handler.py")
handler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handler)

USERS = [t.db_user for t in TOOLS.values()]
REGION = cr_events.REGION
STACK_ID = cr_events.STACK_ID
URL = cr_events.response_url(Ids.DB_USERS, "req-1")
ENV = {"AWS_REGION": REGION, "STACK_ID": STACK_ID, "LOGICAL_RESOURCE_ID": Ids.DB_USERS,
       "CLUSTER_ARN": "arn:cluster", "SECRET_ARN": "arn:secret", "DATABASE": "cadencia"}


@pytest.fixture(scope="module")
def asset():
    return db_users.build_asset(seed_demo_data=False)


@pytest.fixture(scope="module")
def template(default_synth):
    """The default stack's template: every event below is generated from its DbUsers resource."""
    return default_synth.template


def _event(template: dict, request_type: str, **extra: Any) -> dict:
    """CloudFormation's event for the DbUsers resource (tests/infra/cr_events.py), then ``extra``."""
    physical_id = None if request_type == "Create" else handler.PHYSICAL_ID
    return {**cr_events.event(template, Ids.DB_USERS, request_type, physical_id=physical_id), **extra}


def _with_digest(event: dict, digest: str) -> dict:
    return {**event, "ResourceProperties": {**event["ResourceProperties"], "SqlSha256": digest}}


def cloudformation(resource: str, stack: str = "CREATE_IN_PROGRESS"):
    """What DescribeStackResource and DescribeStacks report: (resource status, stack status)."""
    return (lambda stack_id, logical_id: resource), (lambda stack_id: stack)


in_progress = cloudformation("CREATE_IN_PROGRESS")
deleting = cloudformation("DELETE_IN_PROGRESS", "DELETE_IN_PROGRESS")


class Sent(list):
    def __call__(self, url, fields, outcome, context):
        self.append((url, fields, outcome))


class ClientError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code}}


@pytest.fixture
def master(pg_cluster):
    conn = psycopg.connect(pg_cluster.admin_conninfo(), autocommit=True)
    calls: list[str] = []

    def execute(sql: str) -> None:
        calls.append(sql)
        conn.execute(sql)

    yield execute, calls, conn
    conn.close()


def _users(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1",
                                       (USERS,)).fetchall()]


def _process(event, execute, asset, status=in_progress):
    resource_status, stack_state = status
    sent = Sent()
    original = handler.send
    handler.send = sent
    try:
        outcome = handler.process(event, None, ENV, execute=execute, stack_status=resource_status,
                                  stack_state=stack_state, statements_file=asset.path / "statements.json")
    finally:
        handler.send = original
    return outcome, sent


def test_the_handler_accepts_exactly_the_properties_the_template_gives_it(template):
    props = template["Resources"][Ids.DB_USERS]["Properties"]
    assert set(props) == set(handler.PROPERTIES)  # a new property in the template must be taught to the handler
    delivered = cr_events.resource_properties(template, Ids.DB_USERS)
    assert all(isinstance(v, str) for v in delivered.values())  # as CloudFormation passes them


def test_create_update_delete_as_the_master(master, asset, template):
    execute, calls, conn = master
    create = _event(template, "Create")
    assert create["ResourceProperties"]["SqlSha256"] == asset.sql_sha256  # the template names the shipped SQL
    created, sent = _process(create, execute, asset)
    assert created["Status"] == "SUCCESS" and created["PhysicalResourceId"] == handler.PHYSICAL_ID
    assert len(sent) == 1 and sent[0][0] == create["ResponseURL"]
    assert _users(conn) == sorted(USERS)
    bundle, _ = handler.load_statements(asset.path / "statements.json")
    assert calls == bundle["apply"]  # exactly the shipped statements, one call each

    updated, _ = _process(_event(template, "Update"), execute, asset,
                          cloudformation("UPDATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"))
    assert updated["Status"] == "SUCCESS" and updated["PhysicalResourceId"] == handler.PHYSICAL_ID
    deleted, _ = _process(_event(template, "Delete"), execute, asset, deleting)
    assert deleted["Status"] == "SUCCESS" and _users(conn) == []
    again, _ = _process(_event(template, "Delete"), execute, asset, deleting)
    assert again["Status"] == "SUCCESS"  # idempotent


def test_a_failed_first_create_rolls_back_and_the_rollback_completes(master, asset, template):
    """The first deploy fails at the resource; CloudFormation then deletes it (ROLLBACK_IN_PROGRESS)."""
    execute, _calls, conn = master

    def refused(sql: str) -> None:
        raise ClientError("BadRequestException")

    created, sent = _process(_event(template, "Create"), refused, asset)
    assert created["Status"] == "FAILED" and len(sent) == 1
    physical_id = created["PhysicalResourceId"]  # what CloudFormation will name in the Delete
    delete = _event(template, "Delete", PhysicalResourceId=physical_id)
    # What CloudFormation reports while it deletes it (DELETE_IN_PROGRESS), and, should the
    # resource still read CREATE_FAILED, the stack state that deletes it.
    for status in (cloudformation("DELETE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS"),
                   cloudformation("CREATE_FAILED", "ROLLBACK_IN_PROGRESS")):
        deleted, sent = _process(delete, execute, asset, status)
        assert deleted["Status"] == "SUCCESS" and len(sent) == 1, deleted
    assert _users(conn) == []
    # Revoking may fail for the same reason the create did: the rollback still completes
    # (the cluster is deleted by the same rollback).
    for status in (cloudformation("DELETE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS"),
                   cloudformation("CREATE_FAILED", "ROLLBACK_IN_PROGRESS")):
        deleted, sent = _process(delete, refused, asset, status)
        assert deleted["Status"] == "SUCCESS" and len(sent) == 1 and "revoke" in deleted["Reason"], deleted


@pytest.mark.parametrize("resource,stack", [
    ("CREATE_IN_PROGRESS", "CREATE_IN_PROGRESS"),  # CloudFormation is creating it: a Delete is forged
    ("UPDATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"),
    ("UPDATE_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS"),
    ("CREATE_COMPLETE", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS"),  # an old replaced copy: never the live users
    ("UPDATE_COMPLETE", "UPDATE_COMPLETE"),
    ("CREATE_FAILED", "CREATE_FAILED"),  # a failed create kept (rollback disabled): nobody is deleting it
    ("DELETE_FAILED", "DELETE_FAILED"),
])
def test_a_delete_runs_only_while_cloudformation_deletes_the_resource(asset, template, resource, stack):
    calls: list[str] = []
    outcome, sent = _process(_event(template, "Delete"), calls.append, asset, cloudformation(resource, stack))
    assert outcome["Status"] == "FAILED" and "not deleting" in outcome["Reason"]
    assert calls == [] and len(sent) == 1


def test_a_failed_revoke_outside_a_rollback_is_reported(asset, template):
    def refused(sql: str) -> None:
        raise ClientError("BadRequestException")

    shipped, _ = handler.load_statements(asset.path / "statements.json")
    for stack in ("DELETE_IN_PROGRESS", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS"):  # cdk destroy, the teardown phase
        status = cloudformation("DELETE_IN_PROGRESS", stack)
        calls: list[str] = []
        outcome, _ = _process(_event(template, "Delete"), calls.append, asset, status)
        assert outcome["Status"] == "SUCCESS" and calls == shipped["revoke"]  # accepted there...
        outcome, _ = _process(_event(template, "Delete"), refused, asset, status)
        assert outcome["Status"] == "FAILED" and "BadRequestException" in outcome["Reason"]  # ...and a failure shows


def test_a_create_or_update_never_runs_while_the_resource_is_deleted(asset, template):
    for request in ("Create", "Update"):
        calls: list[str] = []
        outcome, _ = _process(_event(template, request), calls.append, asset, deleting)
        assert outcome["Status"] == "FAILED" and calls == []


def test_an_event_cannot_bring_its_own_sql(master, asset, template):
    execute, calls, _conn = master
    hostile = _event(template, "Create")
    hostile["ResourceProperties"]["Statements"] = ["CREATE ROLE intruso SUPERUSER"]
    outcome, sent = _process(hostile, execute, asset)
    assert outcome["Status"] == "FAILED" and "never SQL" in outcome["Reason"] and len(sent) == 1
    outcome, sent = _process(_with_digest(_event(template, "Create"), "0" * 64), execute, asset)
    assert outcome["Status"] == "FAILED" and "is not the SQL this function ships" in outcome["Reason"]
    old = {**_event(template, "Update")["ResourceProperties"], "Statements": ["DROP TABLE pedidos"]}
    outcome, sent = _process(_event(template, "Update", OldResourceProperties=old), execute, asset,
                             cloudformation("UPDATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"))
    assert outcome["Status"] == "FAILED" and "never SQL" in outcome["Reason"]
    for timeout in ("0", "3601", "10.5", "600 ", "", "x" * 3000):
        odd = _event(template, "Create")
        odd["ResourceProperties"]["ServiceTimeout"] = timeout
        outcome, sent = _process(odd, execute, asset)
        assert outcome["Status"] == "FAILED" and "ServiceTimeout" in outcome["Reason"], timeout
    assert calls == []


def test_outside_a_stack_operation_nothing_runs(master, asset, template):
    execute, calls, _ = master
    for request in ("Create", "Update", "Delete"):
        outcome, sent = _process(_event(template, request), execute, asset,
                                 cloudformation("UPDATE_COMPLETE", "UPDATE_COMPLETE"))
        assert outcome["Status"] == "FAILED" and "not" in outcome["Reason"]
        assert calls == [] and len(sent) == 1


def test_a_rollback_to_sql_it_no_longer_ships_succeeds_without_running(master, asset, template):
    execute, calls, _ = master
    current = _event(template, "Update")["ResourceProperties"]
    rollback = _with_digest(_event(template, "Update", OldResourceProperties=current), "a" * 64)
    outcome, _ = _process(rollback, execute, asset, cloudformation("UPDATE_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS"))
    assert outcome["Status"] == "SUCCESS" and calls == [] and "rollback" in outcome["Reason"]


def test_statements_must_be_a_list_of_strings():
    with pytest.raises(TypeError):
        handler.run_statements("DROP TABLE pedidos", lambda sql: None)
    with pytest.raises(TypeError):
        handler.run_statements(["SELECT 1", 7], lambda sql: None)


@pytest.mark.parametrize("url", [
    URL.replace("https://", "http://"),
    URL.replace("saeast1", "useast1"),  # another region's bucket
    URL.replace(".amazonaws.com", ".amazonaws.com.evil.example"),
    URL.replace("https://", "https://user:pw@"),
    URL.replace(".amazonaws.com/", ".amazonaws.com:8443/"),
    URL.split("?")[0],  # not pre-signed
    "https://evil.example/cloudformation-custom-resource-response-saeast1.s3.amazonaws.com/?x=1",
    "https://cloudformation-custom-resource-response-saeast1.s3.amazonaws.com\n.evil.example/?x=1",
])
def test_only_cloudformations_response_bucket_is_answered(url, asset, template):
    calls: list[str] = []
    outcome, sent = _process(_event(template, "Create", ResponseURL=url), calls.append, asset)
    assert outcome is None and sent == [] and calls == []


@pytest.mark.parametrize("url", [
    "https://cloudformation-custom-resource-response-saeast1.s3.amazonaws.com/k?X-Amz-Signature=1",
    "https://cloudformation-custom-resource-response-saeast1.s3-sa-east-1.amazonaws.com/k?X-Amz-Signature=1",
    URL,
])
def test_the_response_url_forms_cloudformation_uses_are_accepted(url):
    assert handler.response_url_is_cloudformations(url, REGION)


def test_another_stacks_or_resources_request_is_not_answered(asset, template):
    for field, value in (("StackId", STACK_ID.replace("0f1e", "9999")), ("LogicalResourceId", "Other")):
        calls: list[str] = []
        outcome, sent = _process(_event(template, "Create", **{field: value}), calls.append, asset)
        assert outcome is None and sent == [] and calls == []


def test_a_resuming_cluster_is_waited_for_and_other_errors_fail():
    attempts, sleeps = [], []

    def resuming_twice(sql: str) -> None:
        attempts.append(sql)
        if len(attempts) <= 2:
            raise ClientError("DatabaseResumingException")

    assert handler.run_statements(["SELECT 1", "SELECT 2"], resuming_twice, sleep=sleeps.append) == 2
    assert attempts == ["SELECT 1", "SELECT 1", "SELECT 1", "SELECT 2"] and sleeps == [2.0, 4.0]

    def bad_sql(sql: str) -> None:
        raise ClientError("BadRequestException")

    with pytest.raises(handler.StatementFailed, match="statement 1/1"):
        handler.run_statements(["GRANT nonsense"], bad_sql, sleep=lambda s: None)


def test_delete_of_a_cluster_already_gone_succeeds_create_fails(asset, template):
    def gone(sql: str) -> None:
        raise ClientError("DatabaseNotFoundException")

    deleted, _ = _process(_event(template, "Delete", PhysicalResourceId="x"), gone, asset, deleting)
    assert deleted["Status"] == "SUCCESS"
    created, sent = _process(_event(template, "Create"), gone, asset)
    assert created["Status"] == "FAILED" and len(sent) == 1


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner,
                                                                                  max_size=3), max_leaves=8)
_FIELDS = ("RequestType", "StackId", "RequestId", "LogicalResourceId", "ResponseURL", "ResourceProperties",
           "PhysicalResourceId", "OldResourceProperties")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replaced=st.dictionaries(st.sampled_from(_FIELDS), _json, max_size=4),
       dropped=st.sets(st.sampled_from(_FIELDS), max_size=3),
       request=st.sampled_from(["Create", "Update", "Delete"]),
       resource=st.sampled_from(["CREATE_IN_PROGRESS", "DELETE_IN_PROGRESS", "CREATE_COMPLETE", "UPDATE_FAILED",
                                 "CREATE_FAILED"]),
       stack=st.sampled_from(["CREATE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS", "UPDATE_COMPLETE", "DELETE_IN_PROGRESS"]))
def test_any_envelope_gets_at_most_one_answer_and_runs_only_shipped_sql(asset, template, replaced, dropped, request,
                                                                         resource, stack):
    base = _event(template, request)
    event = {**base, **replaced}
    for name in dropped:
        event.pop(name, None)
    shipped, _digest = handler.load_statements(asset.path / "statements.json")
    calls: list[str] = []
    outcome, sent = _process(event, calls.append, asset, cloudformation(resource, stack))
    assert len(sent) <= 1  # never two answers
    if sent:
        assert sent[0][0] == base["ResponseURL"] and sent[0][1]["StackId"] == STACK_ID  # only to CloudFormation
        assert outcome["Status"] in ("SUCCESS", "FAILED")
    else:
        assert outcome is None and calls == []
    assert calls in ([], shipped["apply"], shipped["revoke"])  # nothing but the shipped statements
    if calls == shipped["revoke"]:  # only while CloudFormation deletes it
        assert resource == "DELETE_IN_PROGRESS" or (resource == "CREATE_FAILED" and stack in handler.DELETING_STACK)
    elif calls:
        assert resource.endswith("_IN_PROGRESS") and resource != "DELETE_IN_PROGRESS"
        assert isinstance(event.get("ResourceProperties"), dict)


@settings(max_examples=200, deadline=None)
@given(event=_json)
def test_a_non_object_event_is_refused_without_an_answer(event):
    calls: list[str] = []
    outcome = handler.process(event, None, ENV, execute=calls.append, stack_status=in_progress[0],
                              stack_state=in_progress[1])
    assert (outcome is None or isinstance(event, dict)) and calls == []


def test_the_answer_reaches_a_real_http_server_once():
    received: list[dict] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802 - http.server API
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        fields = {"StackId": STACK_ID, "RequestId": "req-1", "LogicalResourceId": "DbUsers"}
        handler.send(f"http://127.0.0.1:{server.server_address[1]}/presigned", fields,
                     {"Status": "FAILED", "Reason": "x" * 5000, "PhysicalResourceId": handler.PHYSICAL_ID}, None)
    finally:
        server.shutdown()
        server.server_close()
    (body,) = received
    assert body["Status"] == "FAILED" and len(body["Reason"]) <= 1000
    assert {k: body[k] for k in fields} == fields and body["PhysicalResourceId"] == handler.PHYSICAL_ID


def test_an_unreachable_response_url_is_retried_with_the_same_body_then_given_up(monkeypatch):
    bodies: list[bytes] = []

    def refuse(request, timeout):
        bodies.append(request.data)
        raise ConnectionRefusedError()

    monkeypatch.setattr(handler.urllib.request, "urlopen", refuse)
    monkeypatch.setattr(handler.time, "sleep", lambda s: None)
    handler.send("https://x/y", {"StackId": "s", "RequestId": "r", "LogicalResourceId": "l"},
                 {"Status": "SUCCESS", "PhysicalResourceId": "p"}, None)
    assert len(bodies) == 3 and len(set(bodies)) == 1


def test_the_status_readers_parse_cloudformations_answers(monkeypatch):
    """DescribeStackResource and DescribeStacks, as boto3 returns them (moto's CloudFormation)."""
    import boto3
    from moto import mock_aws

    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("cloudformation", region_name=REGION)
        template = {"Resources": {"DbUsers": {"Type": "AWS::SQS::Queue"}}}
        stack_id = client.create_stack(StackName="CadenciaAgente", TemplateBody=json.dumps(template))["StackId"]
        assert handler.cloudformation_status(client)(stack_id, "DbUsers") == "CREATE_COMPLETE"
        assert handler.cloudformation_stack_state(client)(stack_id) == "CREATE_COMPLETE"

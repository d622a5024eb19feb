"""The DB-users custom resource handler (infra/db_users_cr/handler.py).

Its Data API calls are replaced by the same statements run on a real PostgreSQL,
one per call; the CloudFormation response goes to a loopback HTTP server.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import psycopg
import pytest

from cadencia_shared.catalog import TOOLS
from infra.stack import DB_USERS_CODE, sql_statements

spec = importlib.util.spec_from_file_location("db_users_handler", DB_USERS_CODE / "handler.py")
handler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handler)

USERS = [t.db_user for t in TOOLS.values()]


def _event(request_type: str, **extra) -> dict:
    return {
        "RequestType": request_type, "StackId": "arn:aws:cloudformation:us-east-1:111122223333:stack/s/1",
        "RequestId": "req-1", "LogicalResourceId": "DbUsers", "ResponseURL": "http://127.0.0.1:1/unused",
        "ResourceProperties": {"ResourceArn": "arn:cluster", "SecretArn": "arn:secret", "Database": "cadencia",
                               "Statements": sql_statements("schema.sql", "grants.sql"),
                               "RevokeStatements": sql_statements("revoke.sql")},
        **extra,
    }


class ClientError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code}}


@pytest.fixture
def executor(pg_cluster):
    calls: list[str] = []
    conn = psycopg.connect(pg_cluster.admin_conninfo(), autocommit=True)

    def execute(sql: str) -> None:
        calls.append(sql)
        conn.execute(sql)

    yield execute, calls, conn
    conn.close()


def _users(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1",
                                       (USERS,)).fetchall()]


def test_create_update_delete_against_postgres(executor):
    execute, calls, conn = executor
    created = handler.handle(_event("Create"), execute)
    assert created["Status"] == "SUCCESS" and created["PhysicalResourceId"] == handler.PHYSICAL_ID
    assert _users(conn) == sorted(USERS)
    assert len(calls) == created["Data"]["Statements"]  # one Data API call per statement

    updated = handler.handle(_event("Update", PhysicalResourceId=handler.PHYSICAL_ID), execute)
    # The same physical id: CloudFormation never sends a Delete for a "replaced" resource.
    assert updated["PhysicalResourceId"] == handler.PHYSICAL_ID
    assert _users(conn) == sorted(USERS)

    deleted = handler.handle(_event("Delete", PhysicalResourceId=handler.PHYSICAL_ID), execute)
    assert deleted["Status"] == "SUCCESS" and _users(conn) == []
    handler.handle(_event("Delete", PhysicalResourceId=handler.PHYSICAL_ID), execute)  # idempotent


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


def test_delete_of_a_cluster_already_gone_succeeds():
    def gone(sql: str) -> None:
        raise ClientError("DatabaseNotFoundException")

    assert handler.handle(_event("Delete", PhysicalResourceId="x"), gone)["Status"] == "SUCCESS"
    with pytest.raises(handler.StatementFailed):
        handler.handle(_event("Create"), gone)


def test_every_outcome_is_sent_to_cloudformation(monkeypatch):
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
        url = f"http://127.0.0.1:{server.server_address[1]}/presigned"

        def failing_executor(props):
            def execute(sql):
                raise ClientError("BadRequestException")
            return execute

        monkeypatch.setattr(handler, "data_api_executor", failing_executor)
        handler.on_event(_event("Create", ResponseURL=url), context=None)
        monkeypatch.setattr(handler, "data_api_executor", lambda props: (lambda sql: None))
        handler.on_event(_event("Create", ResponseURL=url), context=None)
    finally:
        server.shutdown()
        server.server_close()
    failed, succeeded = received
    assert failed["Status"] == "FAILED" and "BadRequestException" in failed["Reason"]
    assert succeeded["Status"] == "SUCCESS" and succeeded["PhysicalResourceId"] == handler.PHYSICAL_ID
    for body in received:
        assert {"StackId", "RequestId", "LogicalResourceId", "PhysicalResourceId"} <= set(body)

"""Red-team finding on the DB-users custom resource's first log line."""

from __future__ import annotations

import importlib.util
import logging

from infra import db_users

spec = importlib.util.spec_from_file_location("db_users_handler_rt", db_users.HANDLER_DIR / "handler.py")
handler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handler)


def test_a_huge_request_type_is_not_logged_whole(monkeypatch, caplog):
    """DEFECT: ``on_event`` logs ``RequestType`` and ``LogicalResourceId`` of the
    raw event before any check, unclipped and unfiltered: a 1 MB (or newline- and
    control-character-laden) value becomes a 1 MB log line, forged log lines
    included. Every other edge caps what it logs; this one must too."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "STACK_ID", "LOGICAL_RESOURCE_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(handler, "data_api_executor", lambda env: None)
    monkeypatch.setattr(handler, "cloudformation_status", lambda: None)
    huge = "Create\n{\"level\":\"INFO\",\"forged\":true}" + "x" * 1_000_000
    with caplog.at_level(logging.INFO):
        handler.on_event({"RequestType": huge, "LogicalResourceId": "y" * 500_000}, None)
    longest = max(len(r.getMessage()) for r in caplog.records)
    assert longest < 2_000, f"a log line of {longest} characters"
    assert not any("\n" in r.getMessage() for r in caplog.records), "a caller-chosen newline reached the log"

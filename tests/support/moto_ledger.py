"""A ledger table in moto in-process (no server): for tests about what is written, not races."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cadencia_shared.ledger import table_definition


@contextmanager
def ledger_table_in_process(monkeypatch: pytest.MonkeyPatch, table: str) -> Iterator[Any]:
    """A DynamoDB client with ``table`` created, isolated from any local stack's endpoint."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(**table_definition(table))
        yield client

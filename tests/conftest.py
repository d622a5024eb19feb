"""Shared fixtures.

- ``local_stack``: the real embedded stack (moto server, PostgreSQL, gateway),
  started once per test session in a private directory and stopped at the end.
- ``mocked_aws``: moto's in-process ``mock_aws`` with the ledger table and the
  gateway secret, for handler unit tests.
- ``tools``: call a tool handler the way Lambda would, with that tool's own
  environment (its DB user), against ``mocked_aws`` + the real PostgreSQL + the
  real gateway server.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import psycopg
import pytest
from moto import mock_aws

from cadencia_shared import db
from cadencia_shared.catalog import GATEWAY_SECRET_NAME, LEDGER_TABLE, TOOLS, ToolSpec
from cadencia_shared.ledger import Ledger, table_definition
from orchestrator.invokers.local import LocalContext, function_environment
from scripts.local_stack import postgres, stack
from scripts.local_stack.aws import LOCAL_CREDENTIALS, REGION
from scripts.local_stack.gateway_admin import GatewayAdmin


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[stack.StackState]:
    shared = os.environ.get("CADENCIA_TEST_STACK_DIR")
    if shared:
        # Mutation testing runs pytest once per mutant: it starts one stack in this
        # directory beforehand (scripts/mutacao.sh), and every run reuses it.
        os.environ["CADENCIA_LOCAL_STACK_DIR"] = shared
        yield stack.up()
        db.close_all()
        return
    directory = tmp_path_factory.mktemp("local-stack")
    previous = os.environ.get("CADENCIA_LOCAL_STACK_DIR")
    os.environ["CADENCIA_LOCAL_STACK_DIR"] = str(directory)
    try:
        state = stack.up()
        yield state
    finally:
        db.close_all()
        leftovers = stack.down()
        if previous is None:
            os.environ.pop("CADENCIA_LOCAL_STACK_DIR", None)
        else:
            os.environ["CADENCIA_LOCAL_STACK_DIR"] = previous
    assert leftovers == [], leftovers


@pytest.fixture
def gateway(local_stack: stack.StackState) -> GatewayAdmin:
    admin = GatewayAdmin(local_stack.gateway_url)
    admin.reset()
    return admin


@pytest.fixture
def erp(local_stack: stack.StackState) -> Iterator[psycopg.Connection]:
    """Admin connection to the ERP database, with the demo rows reset first."""
    postgres.apply_sql(local_stack.postgres, ("demo.sql",))
    with psycopg.connect(local_stack.postgres.admin_conninfo(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def mocked_aws(local_stack: stack.StackState, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for key, value in {**LOCAL_CREDENTIALS, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(**table_definition(LEDGER_TABLE))
        sm = boto3.client("secretsmanager", region_name=REGION)
        sm.create_secret(Name=GATEWAY_SECRET_NAME, SecretString=json.dumps({"token": local_stack.gateway_token}))
        yield {"dynamodb": ddb, "secretsmanager": sm, "ledger": Ledger(LEDGER_TABLE, ddb)}


def _reset_tool_caches() -> None:
    for spec in TOOLS.values():
        module = importlib.import_module(f"{spec.package}.handler")
        reset = getattr(module, "reset_adapters", None)
        if reset:
            reset()


@dataclass
class ToolRunner:
    """Runs tool handlers in-process, each with its own environment."""

    state: stack.StackState
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)

    def environment(self, spec: ToolSpec) -> dict[str, str]:
        env = self.state.function_environment(spec)
        env.pop("AWS_ENDPOINT_URL")  # mock_aws intercepts only AWS host names
        env.update(self.overrides.get(spec.name, {}))
        return env

    def __call__(self, spec: ToolSpec, event: dict[str, Any]) -> dict[str, Any]:
        with function_environment(self.environment(spec)):
            handler = importlib.import_module(f"{spec.package}.handler").lambda_handler
            response = handler(json.loads(json.dumps(event)), LocalContext(spec.function_name))
        return json.loads(json.dumps(response))


@pytest.fixture
def tools(local_stack: stack.StackState, mocked_aws: dict[str, Any], erp: psycopg.Connection) -> Iterator[ToolRunner]:
    _reset_tool_caches()
    yield ToolRunner(local_stack)
    _reset_tool_caches()

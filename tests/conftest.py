"""Shared fixtures and the test layers.

Three layers (docs/testing.md): ``unit`` (no marker: pure logic, in-process moto at most;
seconds), ``stack`` (the real local stack: moto server, PostgreSQL, gateway) and ``infra``
(everything under tests/infra, which synthesizes the CDK app). Markers are set here, not
by hand: a test that uses a fixture of ``STACK_FIXTURES``, directly or through other
fixtures, is marked ``stack``; a test under tests/infra is marked ``infra``. A test
without the ``stack`` marker that starts the stack or PostgreSQL, or uses a running stack, fails
(``scripts/local_stack/layer_guard.py``), so the unit layer cannot grow a dependency on
the stack unnoticed.

- ``local_stack``: the real embedded stack (moto server, PostgreSQL, gateway),
  started once per test session in a private directory and stopped at the end.
- ``mocked_aws``: moto's in-process ``mock_aws`` with the ledger table and the
  gateway secret, for handler unit tests (the secret holds the real gateway's token
  only when the test also uses the local stack).
- ``tools``: call a tool handler the way Lambda would, with that tool's own
  environment (its DB user), against ``mocked_aws`` + the real PostgreSQL + the
  real gateway server.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import psycopg
import pytest
from moto import mock_aws

from cadencia_shared import db, seal_edge
from cadencia_shared.audit_chain import table_definition as audit_table_definition
from cadencia_shared.catalog import GATEWAY_SECRET_NAME, LEDGER_TABLE, TOOLS, ToolSpec
from cadencia_shared.ledger import Ledger, table_definition
from orchestrator.invokers.local import LocalContext, function_environment
from scripts.local_stack import postgres, stack
from scripts.local_stack.aws import LOCAL_CREDENTIALS, REGION
from scripts.local_stack.gateway_admin import GatewayAdmin
from scripts.local_stack.layer_guard import FORBIDDEN_ENV

from .support import seal_harness

# Fixtures that start (or hand out) local-stack processes: a test using any of them,
# even through another fixture, belongs to the stack layer.
STACK_FIXTURES = frozenset({"local_stack", "pg_cluster", "private_stack"})
INFRA_TESTS = Path(__file__).resolve().parent / "infra"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if STACK_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.stack)
        if item.path.is_relative_to(INFRA_TESTS):
            item.add_marker(pytest.mark.infra)


@pytest.fixture(autouse=True)
def layer_guard(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Outside the stack layer, starting the stack or PostgreSQL, or using a running one, is recorded
    (even from a child process, or when the test swallows the error) and fails the test."""
    if request.node.get_closest_marker("stack"):
        yield
        return
    report = tmp_path_factory.mktemp("layer-guard") / "attempts.txt"
    monkeypatch.setenv(FORBIDDEN_ENV, str(report))
    yield
    if report.exists():
        pytest.fail(f"{request.node.nodeid} uses the local stack without the `stack` marker: "
                    f"{report.read_text().strip()}", pytrace=False)


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
def mocked_aws(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    # The real gateway's token only when the test reaches the gateway (it then uses the
    # stack anyway); otherwise a throwaway one, and the test stays in the unit layer.
    if "local_stack" in request.fixturenames:
        gateway_token = request.getfixturevalue("local_stack").gateway_token
    else:
        gateway_token = secrets.token_urlsafe(24)
    for key, value in {**LOCAL_CREDENTIALS, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    # Keep boto3's default session between tests (moto's documented `reset_boto3_session`):
    # the reset exists so a later unmocked test does not reuse mocked credentials, and here
    # every test uses the same fake ones. A new session per test re-parses every service
    # model for each client, which was about half of a unit test's time (cProfile).
    with mock_aws(config={"core": {"reset_boto3_session": False}}):
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(**table_definition(LEDGER_TABLE))
        ddb.create_table(**audit_table_definition())  # the hash chain the profile tool appends to
        sm = boto3.client("secretsmanager", region_name=REGION)
        sm.create_secret(Name=GATEWAY_SECRET_NAME, SecretString=json.dumps({"token": gateway_token}))
        yield {"dynamodb": ddb, "secretsmanager": sm, "ledger": Ledger(LEDGER_TABLE, ddb)}


def _reset_tool_caches() -> None:
    seal_edge.reset_verifiers()
    for spec in TOOLS.values():
        module = importlib.import_module(f"{spec.package}.handler")
        reset = getattr(module, "reset_adapters", None)
        if reset:
            reset()


@dataclass
class ToolRunner:
    """Runs tool handlers in-process, each with its own environment.

    The runner stands where the orchestrator stands: each event it is given without
    an envelope is sealed by a session of its own (``tests/support/seal_harness.py``;
    a limit above any amount, the confirmation gate being the orchestrator's), so these
    tests reach the tool's logic. ``sealed=False`` sends the event as given: a forged call."""

    state: stack.StackState
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    ledger: Ledger | None = None

    def environment(self, spec: ToolSpec) -> dict[str, str]:
        env = self.state.function_environment(spec)
        env.pop("AWS_ENDPOINT_URL")  # mock_aws intercepts only AWS host names
        env.update(self.overrides.get(spec.name, {}))
        return env

    def __call__(self, spec: ToolSpec, event: dict[str, Any], *, sealed: bool = True) -> dict[str, Any]:
        if sealed and self.ledger is not None:
            event = seal_harness.seal_as_turn(self.ledger, spec.name, event)
        with function_environment(self.environment(spec)):
            handler = importlib.import_module(f"{spec.package}.handler").lambda_handler
            response = handler(json.loads(json.dumps(event)), LocalContext(spec.function_name))
        return json.loads(json.dumps(response))


@pytest.fixture
def tools(local_stack: stack.StackState, mocked_aws: dict[str, Any], erp: psycopg.Connection) -> Iterator[ToolRunner]:
    _reset_tool_caches()
    yield ToolRunner(local_stack, ledger=mocked_aws["ledger"])
    _reset_tool_caches()

"""scripts/limpeza.sh: refuses without --yes, plans with --dry-run, and tears the
local stack down in Lab 87's order with every step verified. The verifications
themselves are checked against moto, including the one Lab 87 insisted on: an
empty ledger table is not a deleted one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import boto3
import psycopg
import pytest
from moto import mock_aws

from cadencia_shared.catalog import LEDGER_TABLE, TOOLS
from cadencia_shared.ledger import table_definition
from infra import teardown

ROOT = Path(__file__).resolve().parents[2]
LIMPEZA = ROOT / "scripts" / "limpeza.sh"


def _limpeza(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(LIMPEZA), *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def _local_stack_cli(command: str, directory: Path) -> None:
    # As a person runs it: `python -m scripts.local_stack up` exits and leaves its
    # server running, re-parented, so limpeza (another process) can stop and reap it.
    subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "scripts.local_stack", command], cwd=ROOT,
                   env={**os.environ, "CADENCIA_LOCAL_STACK_DIR": str(directory),
                        "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"},
                   check=True, capture_output=True, timeout=120)


@pytest.fixture
def private_stack(tmp_path, monkeypatch):
    """Our own local stack in a private directory: never someone else's .local-stack."""
    from scripts.local_stack import stack

    directory = tmp_path / "local-stack"
    monkeypatch.setenv("CADENCIA_LOCAL_STACK_DIR", str(directory))
    _local_stack_cli("up", directory)
    state = stack.load()
    assert state is not None
    yield state, directory
    if stack.load() is not None:  # the test failed before limpeza stopped it
        _local_stack_cli("down", directory)


def test_refuses_without_yes_and_dry_run_changes_nothing(private_stack):
    state, directory = private_stack
    env = {"CADENCIA_LOCAL_STACK_DIR": str(directory)}
    refused = _limpeza("--local", env=env)
    assert refused.returncode == 2 and "refusing to act without --yes" in refused.stderr
    planned = _limpeza("--local", "--dry-run", env=env)
    assert planned.returncode == 0, planned.stderr
    titles = [line.strip() for line in planned.stdout.splitlines() if line[:4].strip().rstrip(".").isdigit()]
    assert titles == ["1. functions and their roles", "2. database users", "3. the rest (secrets)",
                      "4. the ledger", "5. stop the local stack"]
    # Nothing happened: the table and the users are still there.
    from scripts.local_stack.aws import session_client

    session_client("dynamodb", state.aws_endpoint).describe_table(TableName=LEDGER_TABLE)
    with psycopg.connect(state.postgres.admin_conninfo()) as conn:
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = ANY(%s)",
                            ([t.db_user for t in TOOLS.values()],)).fetchone()[0] == len(TOOLS)


def test_aws_dry_run_needs_no_credentials_and_keeps_lab87_order():
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.run(["bash", str(LIMPEZA), "--dry-run"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    order = [out.index(s) for s in ("teardown=functions", "teardown=database-users", "cdk destroy", "DeleteTable")]
    assert order == sorted(order)
    assert "ResourceNotFoundException (not a count of 0)" in out
    imported = subprocess.run(["bash", str(LIMPEZA), "--dry-run", "-c", "database=imported"], cwd=ROOT,
                              capture_output=True, text=True, env=env)
    assert "scripts/grants.sh --revoke" in imported.stdout and "teardown=database-users" not in imported.stdout


def test_local_teardown_runs_every_step_and_verifies_it(private_stack):
    state, directory = private_stack
    from scripts.local_stack.aws import session_client

    # A ledger with data in it, and a role + function left in the local AWS.
    ddb = session_client("dynamodb", state.aws_endpoint)
    ddb.put_item(TableName=LEDGER_TABLE, Item={"pk": {"S": "auditoria#teste"}})
    iam = session_client("iam", state.aws_endpoint)
    iam.create_role(RoleName=teardown.ROLE_NAMES[0], AssumeRolePolicyDocument="{}")

    api_pid = json.loads((directory / "api.json").read_text())["pid"]  # `local-stack up` started the API too

    proc = _limpeza("--local", "--yes", env={"CADENCIA_LOCAL_STACK_DIR": str(directory)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert not _alive(api_pid), "the operators' API process outlived the teardown"
    assert not (directory / "api.json").exists()
    assert f"deleted role {teardown.ROLE_NAMES[0]}" in out
    assert "applying sql/revoke.sql" in out
    assert f"{LEDGER_TABLE}: ResourceNotFoundException" in out
    assert "none of cadencia_agente_consulta" in out
    assert out.count(" ok ") + out.count("│ ok") >= 5 and "FAILED" not in out
    assert not (directory / "state.json").exists()
    assert not Path(state.postgres.data_dir).exists()



def _alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for whoever adopted it to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_local_teardown_without_a_stack_fails_clearly(tmp_path):
    proc = _limpeza("--local", "--yes", env={"CADENCIA_LOCAL_STACK_DIR": str(tmp_path / "none")})
    assert proc.returncode == 1 and "no local stack state" in proc.stderr


@pytest.fixture
def moto_aws(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


def test_an_empty_table_is_not_a_deleted_table(moto_aws):
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(**table_definition(LEDGER_TABLE), DeletionProtectionEnabled=True)
    assert ddb.scan(TableName=LEDGER_TABLE)["Count"] == 0  # what Lab 87's check warned against
    check = teardown.verify_table_gone(ddb, LEDGER_TABLE)
    assert not check.ok and "still exists" in check.detail
    teardown.delete_table(ddb, LEDGER_TABLE, progress=print)  # turns deletion protection off first
    assert teardown.verify_table_gone(ddb, LEDGER_TABLE).ok
    teardown.delete_table(ddb, LEDGER_TABLE, progress=print)  # a second run is a no-op


DOC = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "logs:PutLogEvents", '
       '"Resource": "arn:aws:logs:us-east-1:123456789012:log-group:x:*"}]}')


def test_function_role_and_secret_checks(moto_aws):
    iam = boto3.client("iam", region_name="us-east-1")
    lam = boto3.client("lambda", region_name="us-east-1")
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    assert teardown.verify_functions_and_roles_gone(lam, iam).ok
    iam.create_role(RoleName=teardown.ROLE_NAMES[1], AssumeRolePolicyDocument="{}")
    policy = iam.create_policy(PolicyName="p", PolicyDocument=DOC)
    iam.attach_role_policy(RoleName=teardown.ROLE_NAMES[1], PolicyArn=policy["Policy"]["Arn"])
    iam.put_role_policy(RoleName=teardown.ROLE_NAMES[1], PolicyName="inline",
                        PolicyDocument=DOC)
    check = teardown.verify_functions_and_roles_gone(lam, iam)
    assert not check.ok and teardown.ROLE_NAMES[1] in check.detail
    teardown.delete_functions_and_roles(lam, iam, progress=print)
    assert teardown.verify_functions_and_roles_gone(lam, iam).ok

    sm.create_secret(Name=teardown.SECRET_NAMES[0], SecretString='{"token": "x"}')
    sm.delete_secret(SecretId=teardown.SECRET_NAMES[0], RecoveryWindowInDays=7)  # "scheduled", not gone
    check = teardown.verify_secrets_gone(sm, teardown.SECRET_NAMES)
    assert not check.ok and "scheduled for deletion" in check.detail
    teardown.force_delete_secrets(sm, teardown.SECRET_NAMES, progress=print)
    assert teardown.verify_secrets_gone(sm, teardown.SECRET_NAMES).ok

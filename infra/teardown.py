"""Ordered teardown (scripts/limpeza.sh), in Lab 87's order, each step verified.

1. the functions and their roles (nothing may invoke a tool while its DB user goes);
2. the database users (sql/revoke.sql);
3. the rest of the stack (secrets, queues, alarms, network, demo cluster);
4. the ledger, retained by the stack on purpose, deleted explicitly; then
   ``DescribeTable`` must fail with ResourceNotFoundException (not "0 items").

Against AWS, steps 1 and 2 are CloudFormation updates to intermediate stacks
(``-c teardown=functions``, then ``-c teardown=database-users``: the DB-users custom
resource's delete runs revoke.sql through the Data API), so CloudFormation
itself removes each layer and nothing is deleted behind its back; for an
imported cluster step 2 is ``scripts/grants.sh --revoke``. ``--local`` runs the
same four steps against the local stack (moto + PostgreSQL, from
``.local-stack/state.json``) and then stops it: those steps belong to the
development harness (``scripts/local_teardown.py``, which scripts/limpeza.sh
runs), since infra never imports scripts/ (.importlinter).

Refuses to act without ``--yes``; ``--dry-run`` prints the plan and touches nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from cadencia_shared.audit_chain import AUDIT_TABLE
from cadencia_shared.catalog import (
    DB_USERS as ALL_DB_USERS,
)
from cadencia_shared.catalog import (
    GATEWAY_SECRET_NAME,
    LEDGER_TABLE,
    ORCHESTRATOR_FUNCTION_NAME,
    RECONCILER_FUNCTION_NAME,
    TOOLS,
)
from canal_whatsapp.settings import (
    ACCESS_TOKEN_NAME,
    APP_SECRET_NAME,
    HUMAN_REPLY_FUNCTION_NAME,
    INGRESS_FUNCTION_NAME,
    QUEUE_KEY_NAME,
    VERIFY_TOKEN_NAME,
)

from . import contract
from .config import ANTHROPIC_KEY_SECRET_NAME
from .teardown_driver import Check, Step, execute, print_plan

ROOT = Path(__file__).resolve().parents[1]
FUNCTION_NAMES = ([t.function_name for t in TOOLS.values()] + [ORCHESTRATOR_FUNCTION_NAME, RECONCILER_FUNCTION_NAME]
                  + [INGRESS_FUNCTION_NAME, contract.WHATSAPP_CONSUMER_FUNCTION_NAME, HUMAN_REPLY_FUNCTION_NAME])
ROLE_NAMES = ([t.role_name for t in TOOLS.values()]
              + ["cadencia-orquestrador-role", contract.RECONCILER_ROLE_NAME]
              + [contract.WHATSAPP_INGRESS_ROLE_NAME, contract.WHATSAPP_CONSUMER_ROLE_NAME,
                 contract.WHATSAPP_HUMAN_REPLY_ROLE_NAME])
DB_USERS = list(ALL_DB_USERS)  # the tools', the reconciler's and the WhatsApp channel's
SECRET_NAMES = [GATEWAY_SECRET_NAME, ANTHROPIC_KEY_SECRET_NAME, APP_SECRET_NAME, VERIFY_TOKEN_NAME, ACCESS_TOKEN_NAME,
                QUEUE_KEY_NAME]
TABLES = (LEDGER_TABLE, AUDIT_TABLE)


class TeardownError(RuntimeError):
    pass


class LocalTarget(Protocol):
    """The local stack's steps, supplied by the development harness (scripts/local_teardown.py)."""

    def plan(self) -> list[Step]: ...

    def steps(self, progress: Callable[[str], None]) -> list[Step]: ...


def _code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", type(err).__name__))


# --- verifications (shared by the AWS and the local path) ----------------------------


def verify_table_gone(ddb: Any, table: str) -> Check:
    """Gone means DescribeTable fails with ResourceNotFoundException. An empty
    table (a Scan count of 0) still exists, still costs, and is *not* gone."""
    try:
        status = ddb.describe_table(TableName=table)["Table"].get("TableStatus")
    except Exception as err:  # noqa: BLE001 - classified by code
        if _code(err) == "ResourceNotFoundException":
            return Check(True, f"{table}: ResourceNotFoundException")
        return Check(False, f"{table}: DescribeTable failed with {_code(err)}")
    return Check(False, f"{table} still exists ({status})")


def delete_table(ddb: Any, table: str, progress: Callable[[str], None]) -> None:
    try:
        described = ddb.describe_table(TableName=table)["Table"]
    except Exception as err:  # noqa: BLE001
        if _code(err) == "ResourceNotFoundException":
            progress(f"{table}: already gone")
            return
        raise
    if described.get("DeletionProtectionEnabled"):
        progress(f"{table}: turning deletion protection off")
        ddb.update_table(TableName=table, DeletionProtectionEnabled=False)
    progress(f"{table}: DeleteTable")
    ddb.delete_table(TableName=table)
    ddb.get_waiter("table_not_exists").wait(TableName=table, WaiterConfig={"Delay": 2, "MaxAttempts": 150})


def delete_tables(ddb: Any, tables: tuple[str, ...], progress: Callable[[str], None]) -> None:
    for table in tables:
        delete_table(ddb, table, progress)


def verify_tables_gone(ddb: Any, tables: tuple[str, ...]) -> Check:
    checks = [verify_table_gone(ddb, table) for table in tables]
    return Check(all(c.ok for c in checks), "; ".join(c.detail for c in checks))


def _still_there(label: str, describe: Any, gone_code: str) -> str | None:
    """None when ``describe`` fails with exactly ``gone_code``; otherwise what is left."""
    try:
        describe()
    except Exception as err:  # noqa: BLE001
        return None if _code(err) == gone_code else f"{label}: {_code(err)}"
    return label


def verify_functions_and_roles_gone(lambda_client: Any, iam: Any) -> Check:
    remaining = [
        *(_still_there(f"function {n}", lambda n=n: lambda_client.get_function(FunctionName=n),
                       "ResourceNotFoundException") for n in FUNCTION_NAMES),
        *(_still_there(f"role {n}", lambda n=n: iam.get_role(RoleName=n), "NoSuchEntity") for n in ROLE_NAMES),
    ]
    present = [r for r in remaining if r]
    if present:
        return Check(False, "still present: " + ", ".join(present))
    return Check(True, f"{len(FUNCTION_NAMES)} functions: ResourceNotFoundException; "
                       f"{len(ROLE_NAMES)} roles: NoSuchEntity")


def delete_functions_and_roles(lambda_client: Any, iam: Any, progress: Callable[[str], None]) -> None:
    """Direct deletion (the local stack; in AWS CloudFormation does it)."""
    for name in FUNCTION_NAMES:
        try:
            lambda_client.delete_function(FunctionName=name)
            progress(f"deleted function {name}")
        except Exception as err:  # noqa: BLE001
            if _code(err) != "ResourceNotFoundException":
                raise
    for name in ROLE_NAMES:
        try:
            for policy in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
                iam.detach_role_policy(RoleName=name, PolicyArn=policy["PolicyArn"])
            for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
                iam.delete_role_policy(RoleName=name, PolicyName=policy)
            iam.delete_role(RoleName=name)
            progress(f"deleted role {name}")
        except Exception as err:  # noqa: BLE001
            if _code(err) != "NoSuchEntity":
                raise


def verify_secrets_gone(sm: Any, names: list[str]) -> Check:
    remaining = []
    for name in names:
        try:
            described = sm.describe_secret(SecretId=name)
        except Exception as err:  # noqa: BLE001
            if _code(err) == "ResourceNotFoundException":
                continue
            remaining.append(f"{name}: {_code(err)}")
            continue
        remaining.append(f"{name} ({'scheduled for deletion' if described.get('DeletedDate') else 'active'})")
    return Check(not remaining, "still present: " + ", ".join(remaining) if remaining
                 else f"{len(names)} secrets: ResourceNotFoundException")


def force_delete_secrets(sm: Any, names: list[str], progress: Callable[[str], None]) -> None:
    """Without a recovery window, so a redeploy can reuse the fixed names at once."""
    for name in names:
        try:
            sm.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
            progress(f"deleted secret {name} (no recovery window)")
        except Exception as err:  # noqa: BLE001
            if _code(err) != "ResourceNotFoundException":
                raise
    # Deletion is asynchronous; wait until DescribeSecret stops finding them.
    deadline = time.monotonic() + 60
    while not verify_secrets_gone(sm, names).ok and time.monotonic() < deadline:
        time.sleep(1)


def verify_db_users_gone(list_users: Callable[[], list[str]]) -> Check:
    remaining = list_users()
    return Check(not remaining, f"still present: {', '.join(remaining)}" if remaining
                 else f"none of {', '.join(DB_USERS)} exists (pg_roles)")


# --- AWS ------------------------------------------------------------------------------


def _cdk(args: list[str], context: list[str]) -> list[str]:
    cmd = ["npx", "cdk", *args, contract.STACK_NAME]
    for item in context:
        cmd += ["-c", item]
    return cmd


def aws_steps(context: list[str], progress: Callable[[str], None], *, dry_run: bool) -> list[Step]:
    database = dict(c.split("=", 1) for c in context).get("database", "demo")
    deploy = ["deploy", "--require-approval", "never"]
    phase1 = _cdk(deploy, [*context, "teardown=functions"])
    phase2 = _cdk(deploy, [*context, "teardown=database-users"])
    # cdk destroy synthesizes the app first; in a teardown phase the app builds no tool or
    # orchestrator asset, so destroying needs neither pip nor the RDS CA bundle here.
    destroy = _cdk(["destroy", "--force"], [*context, "teardown=functions"])
    users_query = "SELECT rolname FROM pg_roles WHERE rolname IN (" + ", ".join(f"'{u}'" for u in DB_USERS) + ")"

    if dry_run:
        clients: dict[str, Any] = {}
    else:
        import boto3

        session = boto3.session.Session()
        clients = {n: session.client(n) for n in ("cloudformation", "lambda", "iam", "dynamodb", "secretsmanager",
                                                  "rds-data")}
    outputs: dict[str, str] = {}

    def load_outputs() -> None:
        try:
            stack = clients["cloudformation"].describe_stacks(StackName=contract.STACK_NAME)["Stacks"][0]
        except Exception as err:  # noqa: BLE001
            if "does not exist" in str(err):
                progress(f"stack {contract.STACK_NAME} does not exist: skipping to the verifications")
                return
            raise
        outputs.update({o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])})
        if outputs.get("DatabaseMode", database) != database:
            raise TeardownError(f"the stack was deployed with database={outputs['DatabaseMode']}; pass the same "
                                f"-c values to limpeza.sh that the deploy used")

    def run_cdk(cmd: list[str]) -> Callable[[], None]:
        def run() -> None:
            if not outputs:
                load_outputs()
            if outputs:
                _run(cmd, progress=progress)
        return run

    def list_users_data_api() -> list[str]:
        if not outputs.get("DbClusterArn"):
            return []  # the stack (and its cluster) is gone already
        resp = clients["rds-data"].execute_statement(resourceArn=outputs["DbClusterArn"],
                                                     secretArn=outputs["DbSecretArn"], database="cadencia",
                                                     sql=users_query)
        return [rec[0]["stringValue"] for rec in resp.get("records", [])]

    def list_users_psql() -> list[str]:
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "grants.sh"), "--check-absent"], capture_output=True,
                              text=True)
        return [] if proc.returncode == 0 else [proc.stdout.strip() or proc.stderr.strip()]

    def stack_gone() -> Check:
        try:
            clients["cloudformation"].describe_stacks(StackName=contract.STACK_NAME)
        except Exception as err:  # noqa: BLE001
            if "does not exist" in str(err):
                secrets = verify_secrets_gone(clients["secretsmanager"], SECRET_NAMES)
                return Check(secrets.ok, f"stack: does not exist; {secrets.detail}")
            return Check(False, f"DescribeStacks: {_code(err)}")
        return Check(False, f"stack {contract.STACK_NAME} still exists")

    def destroy_rest() -> None:
        run_cdk(destroy)()
        # CloudFormation may leave a secret scheduled for deletion (a recovery window);
        # the names are fixed, so remove them now or the next deploy would fail.
        force_delete_secrets(clients["secretsmanager"], SECRET_NAMES, progress)

    if database == "demo":
        users_step = Step("database users",
                          [" ".join(phase2) + "   (the DB-users custom resource's delete runs sql/revoke.sql "
                           "through the RDS Data API)",
                           f"verify: RDS Data API `{users_query}` returns no row"],
                          run_cdk(phase2), lambda: verify_db_users_gone(list_users_data_api))
    else:
        users_step = Step("database users",
                          ["scripts/grants.sh --revoke   (psql on the imported cluster; PGHOST/PGUSER/... set)",
                           "verify: scripts/grants.sh --check-absent"],
                          lambda: _run(["bash", str(ROOT / "scripts" / "grants.sh"), "--revoke"], progress=progress),
                          lambda: verify_db_users_gone(list_users_psql))
    return [
        Step("functions and their roles",
             [" ".join(phase1) + "   (CloudFormation removes the 4 functions and their roles)",
              "verify: GetFunction -> ResourceNotFoundException, GetRole -> NoSuchEntity, for "
              + ", ".join(FUNCTION_NAMES)],
             run_cdk(phase1), lambda: verify_functions_and_roles_gone(clients["lambda"], clients["iam"])),
        users_step,
        Step("the rest of the stack",
             [" ".join(destroy) + "   (secrets, queue, alarms, dashboard, network"
              + (", demo cluster" if database == "demo" else "") + ")",
              "verify: DescribeStacks -> does not exist; DescribeSecret -> ResourceNotFoundException"],
             destroy_rest, stack_gone),
        Step("the ledger (retained by the stack)",
             [f"UpdateTable {LEDGER_TABLE}, {AUDIT_TABLE} (the audit trail) --no-deletion-protection; "
              "DeleteTable; wait",
              "verify: DescribeTable -> ResourceNotFoundException (not a count of 0)"],
             lambda: delete_tables(clients["dynamodb"], TABLES, progress),
             lambda: verify_tables_gone(clients["dynamodb"], TABLES)),
    ]


def _run(cmd: list[str], *, env: dict[str, str] | None = None, progress: Callable[[str], None]) -> None:
    progress("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise TeardownError(f"{' '.join(cmd[:3])} exited {proc.returncode}")


def main(argv: list[str] | None = None, *, local: LocalTarget | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/limpeza.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--yes", action="store_true", help="really tear down (required to act)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    parser.add_argument("--local", action="store_true", help="the local stack (.local-stack/state.json)")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                        help="the CDK context the stack was deployed with (same -c values as the deploy)")
    args = parser.parse_args(argv)
    progress = lambda message: print(message, flush=True)  # noqa: E731
    target = "local stack" if args.local else f"AWS stack {contract.STACK_NAME}"
    if args.local and local is None:
        print("limpeza: --local tears down the development harness's stack: run scripts/limpeza.sh --local",
              file=sys.stderr)
        return 2

    if args.dry_run or not args.yes:
        steps = local.plan() if local is not None and args.local else aws_steps(args.context, progress, dry_run=True)
        print_plan(steps, target)
        if not args.dry_run:
            print("refusing to act without --yes", file=sys.stderr)
            return 2
        return 0
    try:
        if local is not None and args.local:
            steps = local.steps(progress)
        else:
            steps = aws_steps(args.context, progress, dry_run=False)
    except TeardownError as err:
        print(f"limpeza: {err}", file=sys.stderr)
        return 1
    return 0 if execute(steps, progress) else 1


if __name__ == "__main__":
    raise SystemExit(main())

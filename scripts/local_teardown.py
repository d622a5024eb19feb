"""The local half of scripts/limpeza.sh: the same ordered teardown as in AWS,
against the local stack (moto + PostgreSQL, from ``.local-stack/state.json``),
then the stack stopped. The steps and their verifications are infra/teardown.py's;
this module only knows where the local stack is (infra never imports scripts/).

    scripts/limpeza.sh --local --dry-run | --yes      (runs ``python -m scripts.local_teardown``)
"""

from __future__ import annotations

import os
from collections.abc import Callable

from infra import teardown
from infra.teardown import (
    AUDIT_TABLE,
    DB_USERS,
    LEDGER_TABLE,
    SECRET_NAMES,
    Check,
    Step,
    TeardownError,
    delete_functions_and_roles,
    delete_tables,
    force_delete_secrets,
    verify_db_users_gone,
    verify_functions_and_roles_gone,
    verify_secrets_gone,
    verify_tables_gone,
)
from scripts.local_stack import stack as local_stack
from scripts.local_stack.aws import session_client


def local_steps(progress: Callable[[str], None]) -> list[Step]:
    state = local_stack.load()
    directory = local_stack.state_dir()
    if state is None:
        raise TeardownError(f"no local stack state in {directory / 'state.json'} (nothing is running)")
    aws = {name: session_client(name, state.aws_endpoint) for name in ("lambda", "iam", "dynamodb",
                                                                      "secretsmanager")}
    pg = state.postgres
    pg_env = {**os.environ, "PGHOST": pg.host, "PGPORT": str(pg.port), "PGUSER": pg.admin_user,
              "PGPASSWORD": pg.admin_password, "PGDATABASE": pg.dbname, "PGSSLMODE": "disable"}

    def revoke() -> None:
        teardown._run(["bash", str(teardown.ROOT / "scripts" / "grants.sh"), "--revoke"], env=pg_env, progress=progress)

    def list_users() -> list[str]:
        import psycopg

        with psycopg.connect(pg.admin_conninfo()) as conn:
            rows = conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1", (DB_USERS,))
            return [r[0] for r in rows.fetchall()]

    leftovers: list[str] = []

    def stop() -> None:
        leftovers.extend(local_stack.down(progress))

    def stopped() -> Check:
        if leftovers:
            return Check(False, f"left behind: {leftovers}")
        return Check(local_stack.load() is None, "processes stopped, ports closed, state.json removed")

    steps = [
        Step("functions and their roles",
             ["local tool handlers run in-process; delete any tool/orchestrator function and role in the local AWS",
              "verify: GetFunction -> ResourceNotFoundException, GetRole -> NoSuchEntity"],
             lambda: delete_functions_and_roles(aws["lambda"], aws["iam"], progress),
             lambda: verify_functions_and_roles_gone(aws["lambda"], aws["iam"])),
        Step("database users",
             [f"scripts/grants.sh --revoke   (sql/revoke.sql on {pg.host}:{pg.port}/{pg.dbname})",
              "verify: pg_roles has none of " + ", ".join(DB_USERS)],
             revoke, lambda: verify_db_users_gone(list_users)),
        Step("the rest (secrets)",
             [f"DeleteSecret {', '.join(SECRET_NAMES)} (no recovery window)",
              "verify: DescribeSecret -> ResourceNotFoundException"],
             lambda: force_delete_secrets(aws["secretsmanager"], SECRET_NAMES, progress),
             lambda: verify_secrets_gone(aws["secretsmanager"], SECRET_NAMES)),
        Step("the ledger",
             [f"DeleteTable {state.ledger_table}, {AUDIT_TABLE} (the audit trail)",
              "verify: DescribeTable -> ResourceNotFoundException (not a count of 0)"],
             lambda: delete_tables(aws["dynamodb"], (state.ledger_table, AUDIT_TABLE), progress),
             lambda: verify_tables_gone(aws["dynamodb"], (state.ledger_table, AUDIT_TABLE))),
        Step("stop the local stack",
             [f"stop moto, the gateway and PostgreSQL ({directory})", "verify: no process, no open port"],
             stop, stopped),
    ]
    return steps


def local_plan() -> list[Step]:
    noop = lambda: None  # noqa: E731
    ok = lambda: Check(True, "")  # noqa: E731
    return [
        Step("functions and their roles", ["delete tool/orchestrator functions and roles in the local AWS (moto)",
                                           "verify: GetFunction -> ResourceNotFoundException, GetRole -> NoSuchEntity"],
             noop, ok),
        Step("database users", ["scripts/grants.sh --revoke against the local PostgreSQL (state.json)",
                                "verify: pg_roles has none of " + ", ".join(DB_USERS)], noop, ok),
        Step("the rest (secrets)", [f"DeleteSecret {', '.join(SECRET_NAMES)}",
                                    "verify: DescribeSecret -> ResourceNotFoundException"], noop, ok),
        Step("the ledger", [f"DeleteTable {LEDGER_TABLE}, {AUDIT_TABLE} (the audit trail)",
                            "verify: DescribeTable -> ResourceNotFoundException (not a count of 0)"], noop, ok),
        Step("stop the local stack", ["python -m scripts.local_stack down", "verify: no process, no open port"],
             noop, ok),
    ]


class LocalStack:
    """What infra/teardown.py's ``main`` runs for ``--local``."""

    def plan(self) -> list[Step]:
        return local_plan()

    def steps(self, progress: Callable[[str], None]) -> list[Step]:
        return local_steps(progress)


def main(argv: list[str] | None = None) -> int:
    return teardown.main(argv, local=LocalStack())


if __name__ == "__main__":
    raise SystemExit(main())

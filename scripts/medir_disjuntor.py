"""How many failing calls Powertools' circuit breaker lets through across a fleet.

    scripts/medir-disjuntor [--instancias 1,2,4] [--limite 3]

Powertools 3.37.0's ``utilities.circuit_breaker`` counts consecutive failures in a
module-level dict of each execution environment and writes to the shared store
only on a transition. Here K separate OS processes (K Lambda execution
environments) share one ``CircuitBreakerDynamoDBPersistence`` table on the local
stack's moto server (``local_cache_max_age=0``: every call reads the store) and
call an always-failing downstream in lock-step rounds, as a load balancer spreading
one tool's calls would. The figure printed is how many calls reached the failing
downstream before the circuit opened for everyone; with a fleet-wide counter it
would be ``--limite`` whatever K.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import uuid

from rich.console import Console
from rich.table import Table

from .local_stack import stack
from .local_stack.aws import session_client

ROUNDS = 12


class DownstreamDown(Exception):
    pass


def _instance(endpoint: str, table: str, limit: int, barrier, reached) -> None:
    from aws_lambda_powertools.utilities.circuit_breaker import CircuitBreakerConfig, circuit_breaker
    from aws_lambda_powertools.utilities.circuit_breaker.exceptions import CircuitBreakerOpenError
    from aws_lambda_powertools.utilities.circuit_breaker.persistence import CircuitBreakerDynamoDBPersistence

    store = CircuitBreakerDynamoDBPersistence(table_name=table, boto3_client=session_client("dynamodb", endpoint))
    config = CircuitBreakerConfig(failure_threshold=limit, recovery_timeout=3600, success_threshold=1,
                                  local_cache_max_age=0)

    @circuit_breaker(name="emitir_reembolso", persistence_store=store, config=config)
    def call_tool() -> None:
        with reached.get_lock():
            reached.value += 1
        raise DownstreamDown

    for _ in range(ROUNDS):
        barrier.wait()
        try:
            call_tool()
        except (DownstreamDown, CircuitBreakerOpenError):
            pass


def measure(endpoint: str, instances: int, limit: int) -> int:
    ddb = session_client("dynamodb", endpoint)
    table = f"medir-disjuntor-{uuid.uuid4().hex[:8]}"
    ddb.create_table(TableName=table, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    try:
        ctx = mp.get_context("spawn")
        barrier, reached = ctx.Barrier(instances), ctx.Value("i", 0)
        procs = [ctx.Process(target=_instance, args=(endpoint, table, limit, barrier, reached))
                 for _ in range(instances)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=300)
        return reached.value
    finally:
        ddb.delete_table(TableName=table)


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/medir-disjuntor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--instancias", default="1,2,4")
    parser.add_argument("--limite", type=int, default=3)
    args = parser.parse_args()
    console = Console()
    state = stack.load()
    started = state is None or not all(stack.healthy(state).values())
    if started:
        state = stack.up()
    try:
        table = Table(title=f"Powertools circuit breaker, failure_threshold={args.limite}")
        for col in ("instances (processes)", "failing calls that reached the tool", "expected if fleet-wide"):
            table.add_column(col)
        for k in (int(v) for v in args.instancias.split(",")):
            table.add_row(str(k), str(measure(state.aws_endpoint, k, args.limite)), str(args.limite))
        console.print(table)
    finally:
        if started:
            stack.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

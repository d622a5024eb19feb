"""How many failing calls Powertools' circuit breaker lets through across a fleet.

    scripts/medir-disjuntor [--instancias 1,2,4] [--limite 3]

Powertools 3.37.0's ``utilities.circuit_breaker`` counts consecutive failures in a
module-level dict of each execution environment and writes to the shared store
only on a transition. Here K separate OS processes (K Lambda execution
environments) share one ``CircuitBreakerDynamoDBPersistence`` table on the local
stack's moto server (``local_cache_max_age=0``: every call reads the store) and
call an always-failing downstream in lock-step rounds, as a load balancer spreading
one tool's calls would. The figure printed is how many calls reached the failing
downstream before the circuit opened for everyone. The same rounds through this
project's ``orchestrator.breaker.CircuitBreaker`` (a fleet-wide counter in the
ledger table) for comparison: at most ``--limite`` + K - 1 (the calls already in
flight in the round that trips it).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import sys
import uuid

from rich.console import Console
from rich.table import Table

from .local_stack.aws import session_client
from .operator_cli import stack_for_a_measurement

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
        with contextlib.suppress(DownstreamDown, CircuitBreakerOpenError):
            call_tool()


def _our_instance(endpoint: str, table: str, limit: int, barrier, reached) -> None:
    from cadencia_shared.catalog import TOOLS
    from cadencia_shared.ledger import Ledger
    from orchestrator.breaker import CircuitBreaker
    from orchestrator.controls import CallContext, CallOutcome
    from orchestrator.invokers import Invocation, InvocationStatus
    from orchestrator.model import Deadline
    from orchestrator.tools import ToolCall

    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the breaker's EMF lines; the figure is the count)
    breaker = CircuitBreaker(Ledger(table, session_client("dynamodb", endpoint)), failures=limit, cooldown_s=3600)
    crashed = CallOutcome(invocation=Invocation(InvocationStatus.FUNCTION_ERROR))
    for n in range(ROUNDS):
        barrier.wait()
        call = ToolCall(spec=TOOLS["emitir_reembolso"], tool_use_id=f"toolu_{uuid.uuid4().hex}",
                        arguments={"pedidoId": str(n), "valor": 1.0}, conversation_id="conv-medida", customer_id=1)
        ctx = CallContext(call, Deadline.after(60))
        if breaker.before(ctx) is None:
            with reached.get_lock():
                reached.value += 1
            breaker.after(ctx, crashed)


def _ours_table(ddb) -> str:
    from cadencia_shared.ledger import table_definition

    table = f"medir-disjuntor-{uuid.uuid4().hex[:8]}"
    ddb.create_table(**table_definition(table))
    return table


def _powertools_table(ddb) -> str:
    table = f"medir-disjuntor-{uuid.uuid4().hex[:8]}"
    ddb.create_table(TableName=table, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    return table


def measure(endpoint: str, instances: int, limit: int, *, ours: bool = False) -> int:
    ddb = session_client("dynamodb", endpoint)
    table = (_ours_table if ours else _powertools_table)(ddb)
    try:
        ctx = mp.get_context("spawn")
        barrier, reached = ctx.Barrier(instances), ctx.Value("i", 0)
        target = _our_instance if ours else _instance
        procs = [ctx.Process(target=target, args=(endpoint, table, limit, barrier, reached))
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
    parser.add_argument("--instancias", dest="instances", metavar="INSTANCIAS", default="1,2,4")
    parser.add_argument("--limite", dest="threshold", metavar="LIMITE", type=int, default=3)
    args = parser.parse_args()
    console = Console()
    with stack_for_a_measurement() as state:
        table = Table(title=f"Powertools circuit breaker, failure_threshold={args.threshold}")
        for col in ("instances (processes)", "failing calls through Powertools", "through orchestrator.breaker",
                    "bound for a fleet-wide counter (N + K - 1)"):
            table.add_column(col)
        for k in (int(v) for v in args.instances.split(",")):
            table.add_row(str(k), str(measure(state.aws_endpoint, k, args.threshold)),
                          str(measure(state.aws_endpoint, k, args.threshold, ours=True)), str(args.threshold + k - 1))
        console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

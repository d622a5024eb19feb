"""``python -m scripts.local_stack up|down|status|metrics|reconcile|audit`` (``up`` also starts the
operators' API: an OpenID issuer and an API adapter, docs/operators.md)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from . import emf, stack

console = Console()
T = TypeVar("T")


def _progress(message: str) -> None:
    console.print(f"[bold cyan]›[/] {message}")


def cmd_up(_: argparse.Namespace) -> int:
    with console.status("starting the local stack…"):
        state = stack.up(_progress)
    console.print(f"state: {Path(state.directory) / 'state.json'}")
    from . import console_api

    with console.status("starting the operators' API (OpenID issuer and API adapter)…"):
        api = console_api.start(state)
    console.print(f"API dos operadores: {api['api']}   emissor OpenID: {api['emissor']} "
                  f"(client_id {console_api.LOCAL_AUDIENCE})")
    console.print(f"console no navegador: {api['api']}/console/entrar")
    table = Table(title="usuários de demonstração (scripts/local_stack/demo_users.json)")
    for col in ("usuário", "senha", "grupos"):
        table.add_column(col)
    for row in console_api.demo_users():
        table.add_row(*row)
    console.print(table)
    return 0


def cmd_api(args: argparse.Namespace) -> int:
    from . import console_api

    console_api.run_foreground(Path(args.ready_file))
    return 0


def cmd_down(_: argparse.Namespace) -> int:
    state = stack.load()
    if state is not None:
        from . import console_api

        console_api.stop(Path(state.directory))
    leftovers = stack.down(_progress)
    return 1 if leftovers else 0


def cmd_status(_: argparse.Namespace) -> int:
    state = stack.load()
    if state is None:
        console.print("local stack: [yellow]down[/]")
        return 3
    checks = stack.healthy(state)
    table = Table(title="local stack")
    for col in ("component", "address", "healthy"):
        table.add_column(col)
    table.add_row("stack server (pid)", str(state.server_pid), _mark(checks["servidor"]))
    table.add_row("AWS (moto, serialized)", state.aws_endpoint, _mark(checks["aws"]))
    table.add_row("payment gateway", state.gateway_url, _mark(checks["gateway"]))
    pg = state.postgres
    table.add_row("PostgreSQL" + (" (external)" if pg.external else ""), f"{pg.host}:{pg.port}/{pg.dbname}",
                  _mark(checks["postgres"]))
    console.print(table)
    return 0 if all(checks.values()) else 1


def cmd_metrics(_: argparse.Namespace) -> int:
    state = stack.load()
    if state is None:
        console.print("local stack: [yellow]down[/]")
        return 3
    totals = emf.totals(emf.read_sink(state.metrics_file))
    table = Table(title=f"EMF metrics ({state.metrics_file})")
    for col in ("metric", "dimensions", "total"):
        table.add_column(col)
    for (name, dims), value in sorted(totals.items()):
        table.add_row(name, ", ".join(f"{k}={v}" for k, v in dims), f"{value:g}")
    console.print(table)
    return 0


def _on_the_reconciler(work: Callable[[Any], T]) -> T | None:
    """The reconciler function's start-up on the running local stack, shared by its two
    commands (the pass and the books' audit): its own environment (its DB user, its
    tables), a table or lease given in the environment winning (a pass over a test's
    private ledger), and its metrics into the stack's sink. ``work`` gets the function's
    ``ReconcilerSettings``; None (and a message) when the stack is down."""
    from conciliar_reembolsos.settings import ReconcilerSettings
    from orchestrator.invokers.local import function_environment

    state = stack.load()
    if state is None:
        console.print("local stack: [yellow]down[/] (run: scripts/local-stack up)")
        return None
    env = state.reconciler_environment()
    env.update({k: os.environ[k] for k in ("LEDGER_TABLE", "REFUND_CLAIM_LEASE_S") if k in os.environ})
    with emf.capture_emf(state.metrics_file), function_environment(env):
        return work(ReconcilerSettings.from_env())


def cmd_reconcile(_: argparse.Namespace) -> int:
    """One pass of the scheduled reconciler against the running local stack."""
    from conciliar_reembolsos.handler import build

    report = _on_the_reconciler(lambda settings: build(settings).run_pass(progress=_progress))
    if report is None:
        return 3
    table = Table(title="reconciliation pass")
    for col in ("chaveIdempotencia", "pedidoId", "before", "result", "age (s)"):
        table.add_column(col)
    for visit in report.visits:
        table.add_row(visit.key, visit.order_id, visit.status_before, visit.verdict.value, f"{visit.age_s:.0f}")
    console.print(table)
    console.print(report.summary())
    return 0


def cmd_audit(_: argparse.Namespace) -> int:
    """One pass of the books' consistency audit against the running local stack."""
    from conciliar_reembolsos.handler import build_audit

    report = _on_the_reconciler(lambda settings: build_audit(settings).run(progress=_progress))
    if report is None:
        return 3
    table = Table(title="books audit")
    for col in ("divergência", "pedidoId", "chaveIdempotencia", "reparado"):
        table.add_column(col)
    for finding in report.findings:
        table.add_row(finding.kind.value, finding.order_id, finding.key, "sim" if finding.repaired else "não")
    console.print(table)
    console.print(report.summary())
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    stack.serve(Path(args.ready_file), Path(args.debits_file))
    return 0


def _mark(ok: bool) -> str:
    return "[green]yes[/]" if ok else "[red]no[/]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.local_stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start moto, the gateway and PostgreSQL").set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop everything; non-zero if anything is left").set_defaults(func=cmd_down)
    sub.add_parser("status", help="show components and health").set_defaults(func=cmd_status)
    sub.add_parser("metrics", help="EMF metrics collected by local runs").set_defaults(func=cmd_metrics)
    sub.add_parser("reconcile", help="one pass of the refund reconciler").set_defaults(func=cmd_reconcile)
    sub.add_parser("audit", help="one pass of the books' consistency audit").set_defaults(func=cmd_audit)
    serve = sub.add_parser("serve", help=argparse.SUPPRESS)
    serve.add_argument("--ready-file", required=True)
    serve.add_argument("--debits-file", required=True)
    serve.set_defaults(func=cmd_serve)
    api = sub.add_parser("api", help=argparse.SUPPRESS)
    api.add_argument("--ready-file", required=True)
    api.set_defaults(func=cmd_api)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

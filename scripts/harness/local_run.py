"""A harness run on the local stack (the default target)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import psycopg
from rich.console import Console

from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import Ledger
from emitir_reembolso.gateway import PaymentGatewayClient
from scripts.local_stack import stack
from scripts.local_stack.aws import reset_ledger, session_client
from scripts.local_stack.emf import capture_emf
from scripts.local_stack.gateway_admin import GatewayAdmin

from .minimal import MinimalAgent
from .model_check import MODEL_FAILED, failure_in_turn, sdk_for
from .production import ProductionRunner
from .records import summarize
from .report import control_counts, progress_bar
from .scenario import Scenario
from .scripted_model import InsistentPolicy, ScriptedModelServer


def seed_erp(state: stack.StackState, scenarios: list[Scenario]) -> None:
    """The customers and orders the scenario talks about, fresh (refund columns zeroed)."""
    with psycopg.connect(state.postgres.admin_conninfo(), autocommit=True) as conn, conn.transaction():
        conn.execute("DELETE FROM reembolsos WHERE pedido_id = ANY(%s)", ([sc.pedidoId for sc in scenarios],))
        for sc in scenarios:
            conn.execute("INSERT INTO clientes (id, nome) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                         (sc.clienteId, f"Cliente {sc.clienteId}"))
            conn.execute(
                """INSERT INTO pedidos (id, cliente_id, status, valor_pedido) VALUES (%s, %s, 'entregue', %s)
                   ON CONFLICT (id) DO UPDATE SET cliente_id = EXCLUDED.cliente_id,
                       valor_pedido = EXCLUDED.valor_pedido, status = 'entregue', status_reembolso = 'nenhum',
                       valor_reembolsado = 0""",
                (sc.pedidoId, sc.clienteId, sc.valorPedido),
            )


def run_local(args: argparse.Namespace, scenarios: list[Scenario], console: Console,
              model_env: Callable[[argparse.Namespace, str | None], dict[str, str]],
              scripted: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with ExitStack() as stack_exit:
        state = stack.load()
        if state is None or not all(stack.healthy(state).values()):
            console.print("local stack is not running: starting it for this run")
            state = stack.up(lambda m: console.print(f"[cyan]›[/] {m}"))
            stack_exit.callback(stack.down)
        gateway = GatewayAdmin(state.gateway_url)
        gateway.reset()
        seed_erp(state, scenarios)
        ddb = session_client("dynamodb", state.aws_endpoint)
        reset_ledger(ddb, state.ledger_table)
        # Read with the orchestrator's audit chain: the attempts' outcomes are its links.
        audit = AuditChain(AUDIT_TABLE, ddb)
        ledger = Ledger(state.ledger_table, ddb, audit_chain=audit)

        server = stack_exit.enter_context(ScriptedModelServer()) if args.model == scripted else None
        env = model_env(args, server.base_url if server else None)
        log_level = "INFO" if args.verbose else "WARNING"
        emf = stack_exit.enter_context(capture_emf(state.metrics_file))
        endings: dict[str, str] = {}
        as_scenario_debits: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = list
        total = sum(len(sc.mensagens) for sc in scenarios)

        if args.architecture == "minima":
            sdk = _sdk(env)
            secrets = session_client("secretsmanager", state.aws_endpoint)
            agent = MinimalAgent(
                sdk=sdk, model_id=env["MODEL_ID"],
                gateway=PaymentGatewayClient(state.gateway_url, 5),
                read_gateway_token=lambda: json.loads(
                    secrets.get_secret_value(SecretId=state.secret_name)["SecretString"])["token"],
                erp_conninfo=state.postgres.admin_conninfo(), platform_limit=args.platform_limit,
            )
            with progress_bar(console) as bar:
                task = bar.add_task("minimal design (Figure 1)", total=total)
                for sc in scenarios:
                    if server:
                        server.activate(InsistentPolicy(sc, args.seed))
                    history: list[dict[str, Any]] = []
                    for text in sc.mensagens:
                        _, endings[sc.conversaId] = agent.turn(sc.conversaId, sc.clienteId, history, text)
                        bar.advance(task)
            records, cuts = agent.records, agent.platform_cuts
        else:
            channel = getattr(args, "channel", "direto") == "whatsapp"
            if channel:
                from .whatsapp_run import WhatsAppRunner

                runner = WhatsAppRunner(state, ledger, env, scenarios, log_level=log_level)
                as_scenario_debits = runner.scenario_debits
            else:
                runner = ProductionRunner(state, ledger, env, log_level=log_level)
            stack_exit.callback(runner.close)
            with progress_bar(console) as bar:
                task = bar.add_task("production design (Figure 2)" + (" via WhatsApp" if channel else ""),
                                    total=total)
                for sc in scenarios:
                    if server:
                        server.activate(InsistentPolicy(sc, args.seed))
                    for index, text in enumerate(sc.mensagens):
                        reply = runner.turn(sc.conversaId, sc.clienteId, index, text)
                        endings[sc.conversaId] = reply.get("motivo", "")
                        if endings[sc.conversaId] == MODEL_FAILED:
                            raise failure_in_turn(audit, sc.conversaId, index)
                        bar.advance(task)
            records = [r for sc in scenarios for r in runner.records(sc.conversaId)]
            cuts = set()

        debits = gateway.debits()
        debits = as_scenario_debits(debits)
        summary = summarize(args.architecture, "roteirizado" if server else args.model, records, debits, endings,
                            scenarios, cuts).to_json()
        summary["metricas_emf"] = {f"{name} {dict(dims)}": value for (name, dims), value in emf.totals().items()}
        if args.architecture == "producao":
            summary["controles"] = control_counts(emf.totals())
        summary["seed"] = args.seed
        return summary, records


def _sdk(env: dict[str, str]) -> Any:
    return sdk_for(env)

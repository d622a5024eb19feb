"""A harness run against a deployed stack (``--alvo aws``), found by its outputs.

Only the production design exists in AWS (the minimal design is the thing not to
deploy). Each customer message is sent to the orchestrator Lambda with
``lambda:InvokeFunction``; attempt records are read from the deployed ledger.
Real debits are counted where they happen: at the gateway. A real payment
provider has no ``/_admin`` API, so when ``GATEWAY_ADMIN_URL`` (a test gateway
exposing the same admin API as the local one) is not set, debits are reported
as not counted rather than guessed. The ERP must already hold the scenario's
customers and orders: the harness never writes to a deployed database.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from rich.console import Console

from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.catalog import ORCHESTRATOR_FUNCTION_NAME
from cadencia_shared.ledger import Ledger

from . import report
from .records import record, summarize
from .scenario import Scenario


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def run_deployed(args: argparse.Namespace, scenarios: list[Scenario], console: Console) -> int:
    import boto3
    from botocore.config import Config

    if args.architecture != "producao":
        console.print("[red]--alvo aws runs the production design only: the minimal design is never deployed[/]")
        return 2
    if args.model != "roteirizado":
        console.print("[red]--alvo aws uses the model the stack was deployed with; do not pass --modelo[/]")
        return 2
    outputs = stack_outputs(boto3.client("cloudformation"), args.stack)
    function = outputs.get("OrchestratorFunctionName", ORCHESTRATOR_FUNCTION_NAME)
    ddb = boto3.client("dynamodb")
    # The attempts' outcomes are the orchestrator's audit-chain links (Ledger.attempts joins them).
    ledger = Ledger(outputs["LedgerTableName"], ddb, audit_chain=AuditChain(AUDIT_TABLE, ddb))
    lam = boto3.client("lambda", config=Config(read_timeout=120, retries={"max_attempts": 1}))
    endings: dict[str, str] = {}
    with report.progress_bar(console) as bar:
        task = bar.add_task(f"production design on {args.stack}", total=sum(len(s.mensagens) for s in scenarios))
        for sc in scenarios:
            for index, text in enumerate(sc.mensagens):
                event = {"conversaId": sc.conversaId, "clienteId": sc.clienteId,
                         "mensagemId": f"{sc.conversaId}.m{index + 1}", "mensagem": text}
                resp = lam.invoke(FunctionName=function, Payload=json.dumps(event).encode())
                body = json.loads(resp["Payload"].read() or b"{}")
                endings[sc.conversaId] = body.get("motivo", resp.get("FunctionError", ""))
                bar.advance(task)
    records = [record(evento=i["evento"], timestamp=i["timestamp"], arquitetura="producao",
                      conversaId=i["conversaId"], pedidoId=i.get("pedidoId"), ferramenta=i["ferramenta"],
                      tentativaNumero=int(i["tentativaNumero"]), resultado=i["resultado"],
                      chaveIdempotencia=i.get("chaveIdempotencia"))
               for sc in scenarios for i in ledger.attempts(sc.conversaId)]
    admin_url = os.environ.get("GATEWAY_ADMIN_URL")
    if admin_url:
        from scripts.local_stack.gateway_admin import GatewayAdmin

        debits = GatewayAdmin(admin_url).debits()
    else:
        console.print("[yellow]GATEWAY_ADMIN_URL not set: real debits are not counted for this run[/]")
        debits = []
    summary = summarize("producao", "implantado", records, debits, endings, scenarios, set()).to_json()
    summary["debitos_contados_no_gateway"] = bool(admin_url)
    args.output.write_text(json.dumps(records, ensure_ascii=False, indent=2))
    report.summary_path(args.output).write_text(json.dumps(summary, ensure_ascii=False, indent=2))
    report.print_summary(console, [summary])
    return 3 if admin_url and summary["figuras"]["debitos_duplicados"] else 0

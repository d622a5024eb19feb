"""An operator decides approval requests from a terminal (issue 10).

    scripts/aprovar listar
    scripts/aprovar mostrar <aprovacaoId>
    scripts/aprovar aprovar <aprovacaoId> --por ana.operadora --motivo "conferido com o cliente"
    scripts/aprovar negar   <aprovacaoId> --por ana.operadora --motivo "fora da política"

Every command is one event to the decision Lambda's handler (``cadencia-decidir-aprovacao``):
``--alvo aws`` invokes the deployed function (the operator needs only lambda:InvokeFunction on
it); ``--alvo local`` (default) runs the same handler in-process against the local stack, then
resumes the conversation in-process, as the deployed orchestrator does when the decision Lambda
invokes it. Personal data is masked in every listing. The approver must be on ``APROVADORES``
(the same variable the orchestrator's gate reads).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from cadencia_shared.ledger import Ledger
from orchestrator.invokers.local import InProcessInvoker, LocalContext, function_environment
from orchestrator.model import Deadline
from orchestrator.resume import Resumed, Resumer
from orchestrator.settings import OrchestratorSettings

from .local_stack import stack
from .local_stack.aws import session_client
from .operator_cli import running_stack

DECISION_FUNCTION = "cadencia-decidir-aprovacao"
console = Console()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alvo", dest="target", choices=("local", "aws"), default="local")
    sub = p.add_subparsers(dest="comando", required=True)
    sub.add_parser("listar", help="pedidos de aprovação pendentes (dados pessoais mascarados)")
    show = sub.add_parser("mostrar", help="um pedido de aprovação")
    show.add_argument("approval_id", metavar="aprovacao")
    for name in ("aprovar", "negar"):
        cmd = sub.add_parser(name)
        cmd.add_argument("approval_id", metavar="aprovacao")
        cmd.add_argument("--por", dest="decided_by", metavar="POR", required=True,
                         help="identidade de quem decide (deve estar em APROVADORES)")
        cmd.add_argument("--motivo", dest="reason", metavar="MOTIVO", required=True,
                         help="justificativa (lida pelo modelo numa negação)")
    return p.parse_args(argv)


def event_for(args: argparse.Namespace) -> dict[str, Any]:
    if args.comando == "listar":
        return {"acao": "listar"}
    if args.comando == "mostrar":
        return {"acao": "mostrar", "aprovacaoId": args.approval_id}
    return {"acao": "decidir", "aprovacaoId": args.approval_id, "decisao": args.comando, "aprovador": args.decided_by,
            "justificativa": args.reason}


def local_environment(state: stack.StackState) -> dict[str, str]:
    """The decision Lambda's environment on the local stack (it resumes nothing itself)."""
    keep = {k: v for k, v in os.environ.items() if k.startswith("APROVACAO_") or k in ("APROVADORES", "VERSAO_RELEASE")}
    return {**state.aws_environment(), "LEDGER_TABLE": state.ledger_table, "RESUME_FUNCTION": "", **keep}


def run_local(event: dict[str, Any]) -> tuple[dict[str, Any], Resumed | None]:
    state = running_stack()
    env = local_environment(state)
    with function_environment(env):
        from decidir_aprovacao.handler import lambda_handler

        answer = lambda_handler(event, LocalContext(DECISION_FUNCTION))
    if event["acao"] != "decidir" or not answer.get("ok"):
        return answer, None
    settings = OrchestratorSettings.from_env({**env, "TOOL_INVOKER": "local", "LEDGER_TABLE": state.ledger_table})
    ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
    resumer = Resumer.build(settings, ledger, InProcessInvoker(state.function_environments()))
    return answer, resumer.resume(event["aprovacaoId"], Deadline.after(60))


def run_aws(event: dict[str, Any]) -> dict[str, Any]:
    import boto3

    resp = boto3.client("lambda").invoke(FunctionName=DECISION_FUNCTION, Payload=json.dumps(event).encode())
    return json.loads(resp["Payload"].read())


def show(answer: dict[str, Any], resumed: Resumed | None) -> int:
    if not answer.get("ok"):
        console.print(f"[red]recusado:[/] {answer['erro']['codigo']}")
        return 1
    rows = answer.get("pendentes", [answer.get("aprovacao")])
    table = Table(title="aprovações" if "pendentes" in answer else "aprovação")
    columns = ("aprovacaoId", "status", "ferramenta", "argumentos", "valor", "motivo", "conversaId", "criadoEm",
               "expirada", "decididoPor")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*[json.dumps(row[c], ensure_ascii=False) if isinstance(row[c], dict) else str(row[c])
                        for c in columns])
    console.print(table)
    if resumed is not None:
        console.print(f"conversa retomada: {resumed.reason} ({resumed.status}); ao cliente: {resumed.reply}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    event = event_for(args)
    if args.target == "aws":
        return show(run_aws(event), None)
    answer, resumed = run_local(event)
    return show(answer, resumed)


if __name__ == "__main__":
    sys.exit(main())

"""An operator decides approval requests from a terminal.

    scripts/aprovar listar
    scripts/aprovar mostrar <aprovacaoId>
    scripts/aprovar aprovar <aprovacaoId> --por ana.operadora --motivo "conferido com o cliente"
    scripts/aprovar negar   <aprovacaoId> --por ana.operadora --motivo "fora da política"
    scripts/aprovar expirar      # one pass: close expired requests, tell their customers

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

from orchestrator.invokers.local import InProcessInvoker, LocalContext, function_environment
from orchestrator.model import Deadline
from orchestrator.resume import Resumed, Resumer
from orchestrator.settings import OrchestratorSettings

from .local_stack import stack
from .local_stack.aws import session_client
from .operator_cli import audit_table, chained_ledger, running_stack

DECISION_FUNCTION = "cadencia-decidir-aprovacao"
console = Console()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alvo", dest="target", choices=("local", "aws"), default="local")
    sub = p.add_subparsers(dest="comando", required=True)
    sub.add_parser("listar", help="pedidos de aprovação pendentes (dados pessoais mascarados)")
    sub.add_parser("expirar", help="encerra os pedidos expirados sem decisão e avisa cada cliente")
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
    if args.comando in ("listar", "expirar"):
        return {"acao": args.comando}
    if args.comando == "mostrar":
        return {"acao": "mostrar", "aprovacaoId": args.approval_id}
    return {"acao": "decidir", "aprovacaoId": args.approval_id, "decisao": args.comando, "aprovador": args.decided_by,
            "justificativa": args.reason}


def local_environment(state: stack.StackState) -> dict[str, str]:
    """The decision Lambda's environment on the local stack (it resumes nothing itself),
    with ``AUDIT_TABLE`` as the stack gives it: decisions are links of the chain."""
    keep = {k: v for k, v in os.environ.items() if k.startswith("APROVACAO_") or k in ("APROVADORES", "VERSAO_RELEASE")}
    return {**state.aws_environment(), "LEDGER_TABLE": state.ledger_table, "AUDIT_TABLE": audit_table(),
            "RESUME_FUNCTION": "", **keep}


def run_local(event: dict[str, Any]) -> tuple[dict[str, Any], list[Resumed]]:
    state = running_stack()
    env = local_environment(state)
    with function_environment(env):
        from decidir_aprovacao.handler import lambda_handler

        answer = lambda_handler(event, LocalContext(DECISION_FUNCTION))
    # What the deployed decision Lambda hands to the orchestrator's resume (async there).
    if event["acao"] == "expirar":
        to_resume = list(answer.get("expiradas", []))
    elif event["acao"] == "decidir" and (answer.get("ok") or answer["erro"]["codigo"] == "aprovacao_expirada"):
        to_resume = [event["aprovacaoId"]]
    else:
        return answer, []
    settings = OrchestratorSettings.from_env({**env, "TOOL_INVOKER": "local", "LEDGER_TABLE": state.ledger_table})
    # The resume's links (the consumed approval, the resumed conversation) on the chain too,
    # as the deployed orchestrator writes them.
    ledger = chained_ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
    resumer = Resumer.build(settings, ledger, InProcessInvoker(state.function_environments()))
    return answer, [resumer.resume(approval, Deadline.after(60)) for approval in to_resume]


def run_aws(event: dict[str, Any]) -> dict[str, Any]:
    import boto3

    resp = boto3.client("lambda").invoke(FunctionName=DECISION_FUNCTION, Payload=json.dumps(event).encode())
    return json.loads(resp["Payload"].read())


def show(answer: dict[str, Any], resumed: list[Resumed]) -> int:
    for done in resumed:
        console.print(f"conversa retomada: {done.reason} ({done.status}); ao cliente: {done.reply}")
    if not answer.get("ok"):
        console.print(f"[red]recusado:[/] {answer['erro']['codigo']}")
        return 1
    if "expiradas" in answer:
        console.print(f"{len(answer['expiradas'])} pedido(s) expirado(s) encerrado(s)")
        return 0
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
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    event = event_for(args)
    if args.target == "aws":
        return show(run_aws(event), [])
    answer, resumed = run_local(event)
    return show(answer, resumed)


if __name__ == "__main__":
    sys.exit(main())

"""prova, approvals section: refunds above the threshold (default R$ 500)
against the production design on the local stack, every debit counted on the gateway.

1. No approver configured: each refund is refused before the refund Lambda, audited; 0 debits.
2. Approvers configured: each refund waits; a scripted operator approves ONE through the
   decision Lambda's handler, the conversation resumes: exactly 1 debit.
3. The same approval replayed (decided again, resumed again) is refused; an approval whose
   stored arguments were altered after the decision never runs: still 1 debit.

    python -m scripts.prova_aprovacoes   (the local stack must be up; prova.sh runs it)

Exits 1 when any observed figure differs from the expected one.
"""

from __future__ import annotations

import sys
import uuid
from decimal import Decimal

from rich.console import Console

from cadencia_shared.ledger import ItemType, approval_pk
from decidir_aprovacao.handler import lambda_handler as decision_handler
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker, LocalContext, function_environment
from orchestrator.loop import Orchestrator
from orchestrator.model import Deadline, build_sdk, model_client
from orchestrator.resume import Resumer
from orchestrator.settings import OrchestratorSettings

from .harness.local_run import seed_erp
from .harness.scenario import Scenario
from .harness.scripted_model import InsistentPolicy, ScriptedModelServer
from .local_stack import stack
from .local_stack.aws import session_client
from .local_stack.emf import capture_emf
from .local_stack.gateway_admin import GatewayAdmin
from .operator_cli import audit_table, chained_ledger
from .verdicts import STACK_DOWN_EXIT, checks_table, running_stack, verdict

OPERATOR = "operadora.prova"
CUSTOMER = 8700
ORDERS = (("8701", Decimal("750.00")), ("8702", Decimal("1200.00")), ("8703", Decimal("980.00")))


def _scenario(prefix: str, order: str, value: Decimal) -> Scenario:
    call = {"ferramenta": "emitir_reembolso", "entrada": {"pedidoId": order, "valor": float(value)}}
    return Scenario.model_validate({
        "conversaId": f"{prefix}-{order}-{uuid.uuid4().hex[:6]}", "clienteId": CUSTOMER, "pedidoId": order,
        "valorPedido": float(value), "mensagens": [f"Quero o reembolso do pedido {order}."], "roteiro": [[call]]})


class Section:
    def __init__(self, state: stack.StackState, server: ScriptedModelServer) -> None:
        self.state, self.server = state, server
        # A writer like the stack's functions: its audit records go on each conversation's chain.
        self.ledger = chained_ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
        self.gateway = GatewayAdmin(state.gateway_url)
        self.invoker = InProcessInvoker(state.function_environments())

    def settings(self, approvers: str) -> OrchestratorSettings:
        return OrchestratorSettings.from_env({
            **self.state.aws_environment(), "LEDGER_TABLE": self.state.ledger_table, "AUDIT_TABLE": audit_table(),
            "TOOL_INVOKER": "local", "ANTHROPIC_BASE_URL": self.server.base_url, "APROVADORES": approvers})

    def converse(self, scenario: Scenario, approvers: str) -> str:
        cfg = self.settings(approvers)
        orch = Orchestrator(settings=cfg, ledger=self.ledger, model=model_client(cfg, build_sdk(cfg, api_key="local")),
                            invoker=self.invoker)
        self.server.activate(InsistentPolicy(scenario, seed=87))
        reply = orch.handle(TurnRequest(conversaId=scenario.conversaId, clienteId=scenario.clienteId,
                                        mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=scenario.mensagens[0]),
                            Deadline.after(60))
        return reply.status

    def debits(self, scenarios: list[Scenario]) -> int:
        return sum(len(self.gateway.debits_for(sc.conversaId)) for sc in scenarios)

    def audits(self, scenarios: list[Scenario], event: str) -> int:
        return sum(len(self.ledger.links(sc.conversaId, event)) for sc in scenarios)

    def approval_of(self, scenario: Scenario) -> str:
        (item,) = list(self.ledger.history(scenario.conversaId, item_type=ItemType.APPROVAL))
        return item["aprovacaoId"]

    def decide(self, approval: str) -> dict:
        env = {**self.state.aws_environment(), "LEDGER_TABLE": self.state.ledger_table, "AUDIT_TABLE": audit_table(),
               "RESUME_FUNCTION": "",
               "APROVADORES": OPERATOR}
        event = {"acao": "decidir", "aprovacaoId": approval, "decisao": "aprovar", "aprovador": OPERATOR,
                 "justificativa": "conferido pela operadora da prova"}
        with function_environment(env):
            return decision_handler(event, LocalContext("cadencia-decidir-aprovacao"))

    def resume(self, approval: str) -> str:
        resumer = Resumer.build(self.settings(OPERATOR), self.ledger, self.invoker)
        return resumer.resume(approval, Deadline.after(60)).reason

    def alter(self, approval: str) -> None:
        """Someone with table access rewrites an approved record's amount."""
        self.ledger.client.update_item(
            TableName=self.ledger.table_name, Key={"pk": {"S": approval_pk(approval)}},
            UpdateExpression="SET argumentos = :a",
            ExpressionAttributeValues={":a": {"S": '{"pedidoId":"8703","valor":1.0}'}})


def run(section: Section) -> list[tuple[str, object, object]]:
    rows: list[tuple[str, object, object]] = []
    refused = [_scenario("aprov-sem-aprovador", o, v) for o, v in ORDERS]
    statuses = [section.converse(sc, approvers="") for sc in refused]
    rows.append(("sem aprovador: conversas encaminhadas a um humano", len(refused),
                 statuses.count("aguardando_humano")))
    rows.append(("sem aprovador: recusas auditadas (APROVACAO_SEM_APROVADOR)", len(refused),
                 section.audits(refused, "APROVACAO_SEM_APROVADOR")))
    rows.append(("sem aprovador: débitos reais no gateway", 0, section.debits(refused)))

    waiting = [_scenario("aprov-com-aprovador", o, v) for o, v in ORDERS]
    statuses = [section.converse(sc, approvers=OPERATOR) for sc in waiting]
    rows.append(("com aprovador: conversas aguardando aprovação", len(waiting),
                 statuses.count("aguardando_aprovacao")))
    rows.append(("com aprovador: débitos antes de qualquer decisão", 0, section.debits(waiting)))
    first = section.approval_of(waiting[0])
    decided = section.decide(first)
    rows.append(("operadora aprova 1 pedido (decisão registrada)", True, bool(decided.get("ok"))))
    rows.append(("retomada executa exatamente a chamada aprovada", "aprovada_executada", section.resume(first)))
    rows.append(("com aprovador: débitos reais no gateway", 1, section.debits(waiting)))

    replay = section.decide(first)
    rows.append(("aprovação repetida: decisão recusada", "aprovacao_ja_decidida",
                 (replay.get("erro") or {}).get("codigo")))
    rows.append(("aprovação repetida: retomada", "nada_a_retomar", section.resume(first)))
    altered = section.approval_of(waiting[2])
    section.decide(altered)
    section.alter(altered)
    rows.append(("aprovação alterada depois da decisão: retomada", "aprovacao_inutilizavel", section.resume(altered)))
    rows.append(("total de débitos reais (todas as conversas desta seção)", 1, section.debits(refused + waiting)))
    return rows


def main() -> int:
    console = Console()
    state = running_stack(console)
    if state is None:
        return STACK_DOWN_EXIT
    seed_erp(state, [_scenario("seed", o, v) for o, v in ORDERS])
    # The section's metrics go to the local stack's sink (scripts.local_stack metrics), not the table.
    with ScriptedModelServer() as server, capture_emf(state.metrics_file):
        rows = run(Section(state, server))
    table = checks_table("prova — aprovações (reembolsos acima de R$ 500)", "verificação", "esperado", "observado")
    failed = 0
    for name, expected, observed in rows:
        ok = expected == observed
        failed += not ok
        table.add_row(name, str(expected), str(observed), verdict(ok))
    console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

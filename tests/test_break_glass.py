"""The direct invocation of the decision function is the break-glass path: the same
policy applies (two distinct people above the amount) and every decision is audited
with via = quebra_de_vidro."""

from __future__ import annotations

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.audit_chain import AUDIT_TABLE
from decidir_aprovacao.handler import lambda_handler
from orchestrator.invokers.local import LocalContext, function_environment

from .test_operator_api import _chain, _ledger, _waiting

POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": "ana.operadora,bruno.operador",
          "APROVACAO_DUPLA_ACIMA_REAIS": "150"}


def _decide(local_stack, approval: str, who: str) -> dict:
    env = {**local_stack.aws_environment(), "LEDGER_TABLE": local_stack.ledger_table, "RESUME_FUNCTION": "",
           "AUDIT_TABLE": AUDIT_TABLE, **POLICY}
    event = {"acao": "decidir", "aprovacaoId": approval, "decisao": "aprovar", "aprovador": who,
             "justificativa": "emergência conferida"}
    with function_environment(env):
        return lambda_handler(event, LocalContext("cadencia-decidir-aprovacao"))


def test_break_glass_cannot_skip_the_second_person_and_is_audited_as_such(local_stack, erp, gateway):
    conv, approval = _waiting(local_stack, 189.9, policy=POLICY)
    for _ in range(2):
        answer = _decide(local_stack, approval, "ana.operadora")
        assert answer["ok"] and answer["resultado"] == "aguardando_segundo_aprovador", answer
    assert ApprovalStore(_ledger(local_stack)).get(approval).status is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []
    assert _decide(local_stack, approval, "mallory")["erro"]["codigo"] == "aprovador_nao_autorizado"
    answer = _decide(local_stack, approval, "bruno.operador")
    assert answer["ok"] and answer["resultado"] == "aprovada", answer
    vias = {r["detalhes"].get("via") for r in _chain(local_stack, conv)
            if r["evento"] in ("APROVACAO_PRIMEIRA_PESSOA", "APROVACAO_DECIDIDA", "DECISAO_DE_APROVACAO_RECUSADA")}
    assert vias == {"quebra_de_vidro"}, vias

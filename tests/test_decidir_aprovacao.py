"""The decision Lambda's edge and its answers: strict events (a typed error, nothing
changed), masked listings, and scripts/aprovar.py against the local stack."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import ItemType, Ledger
from decidir_aprovacao.handler import lambda_handler
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker, LocalContext, function_environment
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build

ROOT = Path(__file__).resolve().parents[1]
POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": "ana.operadora"}


def _env(local_stack) -> dict[str, str]:
    return {**local_stack.aws_environment(), "LEDGER_TABLE": local_stack.ledger_table, "RESUME_FUNCTION": "",
            **POLICY}


def _call(local_stack, event) -> dict:
    with function_environment(_env(local_stack)):
        return lambda_handler(event, LocalContext("cadencia-decidir-aprovacao"))


def _waiting(local_stack, conv: str) -> str:
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 189.9}), text_reply("x"))
    orch, _ = build(model, ledger, InProcessInvoker(local_stack.function_environments()), **POLICY)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                            mensagem="reembolso"), Deadline.after(60))
    (item,) = list(ledger.history(conv, item_type=ItemType.APPROVAL))
    return item["aprovacaoId"]


def test_the_listing_masks_the_conversation_and_customer(local_stack, erp):
    conv = f"5521998765432-{uuid.uuid4().hex[:6]}"  # a conversation id that is a phone number
    approval = _waiting(local_stack, conv)
    answer = _call(local_stack, {"acao": "listar"})
    (row,) = [r for r in answer["pendentes"] if r["aprovacaoId"] == approval]
    text = json.dumps(answer)
    assert "5521998765432" not in text and conv not in text and "1001" not in text
    assert row["argumentos"] == {"pedidoId": "4821", "valor": 189.9} and row["valor"] == "189.90"
    assert _call(local_stack, {"acao": "mostrar", "aprovacaoId": approval})["aprovacao"]["status"] == "pendente"


def test_aprovar_py_lists_and_decides_on_the_local_stack(local_stack, erp, gateway):
    conv = f"script-{uuid.uuid4().hex[:8]}"
    approval = _waiting(local_stack, conv)
    env = {**__import__("os").environ, **POLICY, "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}", "COLUMNS": "250"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "scripts.aprovar", *a], cwd=ROOT, env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    listed = run("listar")
    assert listed.returncode == 0 and approval in listed.stdout and conv not in listed.stdout
    stranger = run("aprovar", approval, "--por", "mallory", "--motivo", "confia")
    assert stranger.returncode == 1 and "aprovador_nao_autorizado" in stranger.stdout
    ok = run("aprovar", approval, "--por", "ana.operadora", "--motivo", "conferido")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "aprovada_executada" in ok.stdout
    assert len(gateway.debits_for(conv)) == 1
    replay = run("aprovar", approval, "--por", "ana.operadora", "--motivo", "de novo")
    assert replay.returncode == 1 and "aprovacao_ja_decidida" in replay.stdout
    assert len(gateway.debits_for(conv)) == 1
    # The decision, its refused replay, the consumed approval and the resume are links of
    # the conversation's hash chain, as the deployed Lambdas write them — never ledger items.
    client = session_client("dynamodb", local_stack.aws_endpoint)
    chain = AuditChain(AUDIT_TABLE, client, anchor_table=local_stack.ledger_table)
    events = [r["evento"] for r in chain.records(conv)]
    for event in ("APROVACAO_DECIDIDA", "DECISAO_DE_APROVACAO_RECUSADA", "APROVACAO_CONSUMIDA",
                  "CONVERSA_RETOMADA_APOS_APROVACAO"):
        assert event in events, events
    ledger = Ledger(local_stack.ledger_table, client)
    unchained = [i["evento"] for i in ledger.history(conv, item_type=ItemType.AUDIT)]
    assert not set(unchained) & {"APROVACAO_DECIDIDA", "DECISAO_DE_APROVACAO_RECUSADA", "APROVACAO_CONSUMIDA",
                                 "CONVERSA_RETOMADA_APOS_APROVACAO"}, unchained


GOOD = {"acao": "decidir", "aprovacaoId": "a" * 32, "decisao": "aprovar", "aprovador": "ana.operadora",
        "justificativa": "conferido"}
HOSTILE = [
    None, "decidir", [GOOD], {**GOOD, "acao": "apagar"}, {**GOOD, "aprovacaoId": "A" * 32},
    {**GOOD, "aprovacaoId": "a" * 32 + "\n"}, {**GOOD, "aprovacaoId": 1}, {**GOOD, "decisao": "sim"},
    {**GOOD, "decisao": True}, {**GOOD, "aprovador": "Ana Operadora"}, {**GOOD, "aprovador": "ana\n"},
    {**GOOD, "justificativa": "ok\u202e"}, {**GOOD, "justificativa": "x" * 501}, {**GOOD, "extra": 1},
    {k: v for k, v in GOOD.items() if k != "aprovador"},
    # the attempt-number suffix (ledger.approval_id): 1-999, no sign, no leading zero, ASCII digits only
    *({**GOOD, "aprovacaoId": "a" * 32 + suffix} for suffix in ("-0", "-01", "-1000", "--1", "-", "-1\n", "-\u0661",
                                                                 "-1-2", "#1")),
]


def test_hostile_events_get_a_typed_error_and_change_nothing(local_stack):
    for event in HOSTILE:
        answer = _call(local_stack, event)
        assert answer["ok"] is False and answer["erro"]["codigo"] == "entrada_invalida", event


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from([*list(GOOD), "x"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40),
                                 st.sampled_from(list(GOOD.values()))), max_size=6))
def test_any_event_is_answered_never_raises_and_decides_nothing_unknown(local_stack, event):
    answer = _call(local_stack, event)
    assert answer["ok"] is False or event.get("acao") in ("listar", "mostrar", "expirar")
    if answer["ok"] is False:
        assert set(answer) == {"ok", "erro"} and len(json.dumps(answer)) < 5000


@pytest.mark.parametrize("suffix", ["", "-1", "-50"])
def test_a_decision_on_an_unknown_id_is_refused_and_creates_nothing(local_stack, suffix):
    unknown = uuid.uuid4().hex + suffix
    answer = _call(local_stack, {**GOOD, "aprovacaoId": unknown})
    assert answer == {"ok": False, "erro": {"codigo": "aprovacao_inexistente"}}
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    assert ApprovalStore(ledger).get(unknown) is None  # the conditional write created no item


def test_the_expiry_pass_is_a_strict_event_and_resumes_only_expired_requests(local_stack, erp):
    conv = f"expirar-{uuid.uuid4().hex[:8]}"
    approval = _waiting(local_stack, conv)  # valid for a day: not expired
    answer = _call(local_stack, {"acao": "expirar"})
    assert answer["ok"] is True and approval not in answer["expiradas"]
    for event in ({"acao": "expirar", "aprovacaoId": approval}, {"acao": "expirar", "x": 1}, {"acao": "EXPIRAR"}):
        assert _call(local_stack, event)["erro"]["codigo"] == "entrada_invalida", event

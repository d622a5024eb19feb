"""The operators' API on the local stack, over real HTTP: the OpenID issuer, the API
adapter (API Gateway's JWT authorizer rules) and the deployed handlers behind it.
Every refused case: the request still pending and 0 debits at the gateway."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import ConversationStatus, ItemType, Ledger
from orchestrator.api_routes import LOCAL_AUDIENCE
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from scripts.local_stack import console_api, jwt_rs256, oidc_issuer
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, fixture, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

# Threshold R$ 100 (a person decides), two people above R$ 150 (the demo orders are small).
POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": "ana.operadora", "APROVACAO_DUPLA_ACIMA_REAIS": "150"}
USERS = oidc_issuer.load_users()


@pytest.fixture
def api(local_stack, tmp_path) -> Iterator[console_api.ConsoleApi]:
    served = console_api.serve(local_stack, extra_env=POLICY, key_file=tmp_path / "chave.pem")
    try:
        yield served
    finally:
        served.close()


def _ledger(local_stack) -> Ledger:
    return Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))


def _waiting(local_stack, amount: float, *, policy: dict[str, str] = POLICY) -> tuple[str, str]:
    """A conversation waiting on a refund approval of ``amount`` for order 4821 (R$ 189,90)."""
    conv = f"api-{uuid.uuid4().hex[:10]}"
    ledger = _ledger(local_stack)
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": amount}), text_reply("x"))
    orch, _ = build(model, ledger, InProcessInvoker(local_stack.function_environments()), **policy)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                            mensagem="reembolso"), Deadline.after(60))
    (item,) = list(ledger.history(conv, item_type=ItemType.APPROVAL))
    return conv, item["aprovacaoId"]


def token(api: console_api.ConsoleApi, login: str) -> str:
    form = urllib.parse.urlencode({"grant_type": "password", "username": login, "password": USERS[login].password,
                                   "client_id": LOCAL_AUDIENCE}).encode()
    with urllib.request.urlopen(f"{api.issuer.url}/token", data=form, timeout=10) as resp:
        return json.load(resp)["access_token"]


def call(api: console_api.ConsoleApi, method: str, path: str, *, bearer: str | None,
         body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{api.url}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {bearer}"} if bearer else {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def decide(api, approval: str, login_or_token: str, **body: Any) -> tuple[int, dict[str, Any]]:
    bearer = token(api, login_or_token) if login_or_token in USERS else login_or_token
    return call(api, "POST", f"/aprovacoes/{approval}/decisao", bearer=bearer,
                body={"decisao": "aprovar", "justificativa": "conferido com o cliente", **body})


def _status(local_stack, approval: str) -> ApprovalStatus:
    return ApprovalStore(_ledger(local_stack)).get(approval).status


def _chain(local_stack, conv: str) -> list[dict[str, Any]]:
    client = session_client("dynamodb", local_stack.aws_endpoint)
    records = AuditChain(AUDIT_TABLE, client, anchor_table=local_stack.ledger_table).records(conv)
    return [{**r, "detalhes": json.loads(r["detalhes"])} for r in records]


def _claims(api, login: str, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": USERS[login].sub, "iss": api.issuer.url, "client_id": LOCAL_AUDIENCE, "token_use": "access",
            "username": login, "cognito:groups": list(USERS[login].groups), "iat": now, "nbf": now,
            "exp": now + 600, **changes}


def test_tokens_the_authorizer_refuses_get_401_and_nothing_moves(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 189.9)
    stranger = jwt_rs256.new_key()
    kid = jwt_rs256.jwk(api.issuer.key.public_key())["kid"]
    good_header = {"alg": "RS256", "typ": "JWT", "kid": kid}
    refused = {
        "forged (another key, the issuer's kid)": jwt_rs256.sign(_claims(api, "ana"), stranger, kid=kid),
        "expired": jwt_rs256.sign(_claims(api, "ana", exp=int(time.time()) - 5), api.issuer.key),
        "wrong audience": jwt_rs256.sign(_claims(api, "ana", client_id="outro-app"), api.issuer.key),
        "wrong issuer": jwt_rs256.sign(_claims(api, "ana", iss="http://127.0.0.1:1"), api.issuer.key),
        "not yet valid": jwt_rs256.sign(_claims(api, "ana", nbf=int(time.time()) + 600), api.issuer.key),
        "alg none": ".".join([jwt_rs256.b64url(json.dumps({**good_header, "alg": "none"}).encode()),
                              jwt_rs256.b64url(json.dumps(_claims(api, "ana")).encode()), ""]),
        "HS256 header": jwt_rs256.sign(_claims(api, "ana"), api.issuer.key, header={**good_header, "alg": "HS256"}),
        "garbage": "abc.def.ghi",
    }
    for name, bad in refused.items():
        status, body = decide(api, approval, bad)
        assert (status, body) == (401, {"message": "Unauthorized"}), name
    status, _ = call(api, "POST", f"/aprovacoes/{approval}/decisao", bearer=None,
                     body={"decisao": "aprovar", "justificativa": "sem token"})
    assert status == 401
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_a_person_outside_the_approvers_group_gets_403(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 189.9)
    for login in ("carla", "davi"):  # an attendant, a supervisor
        status, body = decide(api, approval, login)
        assert (status, body["erro"]["codigo"]) == (403, "grupo_nao_autorizado"), login
        status, _ = call(api, "GET", "/aprovacoes", bearer=token(api, login))
        assert status == 403
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_an_actor_in_the_body_is_refused_and_nothing_changes(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 189.9)
    for field in ("aprovador", "decididoPor", "sub"):
        status, body = decide(api, approval, "ana", **{field: "bruno"})
        assert (status, body["erro"]["codigo"]) == (400, "ator_no_corpo"), field
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_an_approver_approves_once_and_the_audit_names_the_person(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 120.0)  # below the two-person amount
    status, listed = call(api, "GET", "/aprovacoes", bearer=token(api, "ana"))
    assert status == 200 and approval in [r["aprovacaoId"] for r in listed["pendentes"]]
    status, body = decide(api, approval, "ana")
    assert (status, body["resultado"]) == (200, "aprovada")
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["120.00"]
    decided = [r for r in _chain(local_stack, conv) if r["evento"] == "APROVACAO_DECIDIDA"]
    assert [(r["detalhes"]["pessoaSub"], r["detalhes"]["pessoaNome"], r["detalhes"]["via"]) for r in decided] == [
        (USERS["ana"].sub, "ana", "api")]
    status, body = decide(api, approval, "bruno")
    assert (status, body["erro"]["codigo"]) == (409, "aprovacao_ja_decidida")
    assert len(gateway.debits_for(conv)) == 1


def test_above_the_two_person_amount_one_approver_twice_stays_pending(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 189.9)
    for _ in range(2):
        status, body = decide(api, approval, "ana")
        assert (status, body["resultado"]) == (200, "aguardando_segundo_aprovador")
        assert _status(local_stack, approval) is ApprovalStatus.PENDING
        assert gateway.debits_for(conv) == []
    status, body = decide(api, approval, "bruno")
    assert (status, body["resultado"]) == (200, "aprovada")
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["189.90"]
    people = [r["detalhes"]["pessoaSub"] for r in _chain(local_stack, conv)
              if r["evento"] in ("APROVACAO_PRIMEIRA_PESSOA", "APROVACAO_DECIDIDA")]
    assert USERS["ana"].sub in people and USERS["bruno"].sub in people


def test_a_cancelled_conversations_request_is_refused(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 120.0)
    assert _ledger(local_stack).request_cancellation(conv)
    status, body = decide(api, approval, "ana")
    assert (status, body["erro"]["codigo"]) == (409, "conversa_cancelada")
    assert gateway.debits_for(conv) == []


def test_a_denier_cannot_approve_afterwards(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 120.0)
    status, body = decide(api, approval, "ana", decisao="negar", justificativa="fora da política")
    assert (status, body["resultado"]) == (200, "negada")
    status, body = decide(api, approval, "ana")
    assert (status, body["erro"]["codigo"]) == (409, "aprovador_ja_negou")
    assert gateway.debits_for(conv) == []


def test_a_higher_amount_is_refused_and_a_malformed_one_is_invalid(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 120.0)
    status, body = decide(api, approval, "ana", valorAprovado="120.01")
    assert (status, body["erro"]["codigo"]) == (409, "valor_acima_do_pedido")
    for bad in ("1e2", "-5", "0", "12.345", " 100", "100,00"):
        status, body = decide(api, approval, "ana", valorAprovado=bad)
        assert (status, body["erro"]["codigo"]) == (400, "valor_invalido"), bad
    status, body = decide(api, approval, "ana", valorAprovado=110)
    assert (status, body["erro"]["codigo"]) == (400, "entrada_invalida")
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_a_lower_amount_is_what_is_debited_and_told(local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 140.0)
    status, body = decide(api, approval, "ana", valorAprovado="105.50")
    assert (status, body["resultado"], body["substituiu"]) == (200, "aprovada", approval)
    assert body["aprovacao"]["valor"] == "105.50" and body["aprovacao"]["aprovacaoId"] != approval
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["105.50"]
    assert "R$ 105,50" in api.resumed[-1].reply
    assert _status(local_stack, approval) is ApprovalStatus.VOIDED
    replaced = [r for r in _chain(local_stack, conv) if r["evento"] == "APROVACAO_SUBSTITUIDA_POR_VALOR_MENOR"]
    assert [(r["detalhes"]["valorPedido"], r["detalhes"]["valorAprovado"]) for r in replaced] == [("140.00", "105.50")]


def test_an_attendant_replies_through_the_api_and_is_audited(local_stack, api):
    ledger = _ledger(local_stack)
    conv = f"api-{uuid.uuid4().hex[:10]}"
    orch, _ = build(ScriptedModel(fixture("refusal")), ledger, CountingInvoker())
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                            mensagem="quero falar com alguém"), Deadline.after(60))
    assert ledger.read_conversation(conv).status is ConversationStatus.WAITING_HUMAN
    path = f"/conversas/{conv}/respostas"
    status, body = call(api, "POST", path, bearer=token(api, "carla"), body={"texto": "Oi", "atendente": "ana"})
    assert (status, body["erro"]["codigo"]) == (400, "ator_no_corpo")
    status, body = call(api, "POST", path, bearer=token(api, "ana"), body={"texto": "Oi"})
    assert (status, body["erro"]["codigo"]) == (403, "grupo_nao_autorizado")
    assert ledger.read_conversation(conv).messages[-1]["role"] == "user"  # nothing written
    status, body = call(api, "POST", path, bearer=token(api, "carla"), body={"texto": "Oi! Sou a Carla."})
    assert status == 200 and body["ok"], body
    replied = [r["detalhes"] for r in _chain(local_stack, conv) if r["evento"] == "ATENDENTE_RESPONDEU"]
    assert [(d["pessoaSub"], d["via"]) for d in replied] == [(USERS["carla"].sub, "api")]


def test_a_lower_amount_that_still_needs_two_people_closes_the_original_when_the_second_approves(
        local_stack, erp, gateway, api):
    conv, approval = _waiting(local_stack, 189.9)
    status, body = decide(api, approval, "ana", valorAprovado="160.00")
    assert (status, body["resultado"]) == (200, "aguardando_segundo_aprovador")
    lower = body["aprovacao"]["aprovacaoId"]
    assert lower != approval and gateway.debits_for(conv) == []
    status, body = decide(api, lower, "ana")  # the same person again: nothing moves
    assert (status, body["resultado"]) == (200, "aguardando_segundo_aprovador")
    status, body = decide(api, lower, "bruno")
    assert (status, body["resultado"], body["substituiu"]) == (200, "aprovada", approval)
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["160.00"]
    assert _status(local_stack, approval) is ApprovalStatus.VOIDED
    assert "R$ 160,00" in api.resumed[-1].reply


def test_a_lower_approval_cut_before_the_original_closed_finishes_when_sent_again(
        local_stack, erp, gateway, api, monkeypatch):
    from cadencia_shared import approval_policy

    conv, approval = _waiting(local_stack, 140.0)
    real_close = approval_policy._close_replaced

    def crash(*args, **kwargs):
        raise RuntimeError("killed after the lower request was approved")

    monkeypatch.setattr(approval_policy, "_close_replaced", crash)
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        decide(api, approval, "ana", valorAprovado="110.00")  # the adapter's connection dies with the crash
    assert gateway.debits_for(conv) == [] and _status(local_stack, approval) is ApprovalStatus.PENDING
    monkeypatch.setattr(approval_policy, "_close_replaced", real_close)
    status, body = decide(api, approval, "bruno", valorAprovado="110.00")  # not bruno's decision to finish
    assert (status, body["erro"]["codigo"]) == (409, "aprovacao_ja_decidida")
    status, body = decide(api, approval, "ana", valorAprovado="110.00")
    assert (status, body["resultado"], body["substituiu"]) == (200, "aprovada", approval)
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["110.00"]
    assert _status(local_stack, approval) is ApprovalStatus.VOIDED

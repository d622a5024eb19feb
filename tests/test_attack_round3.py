"""Third outside attack round on the second round's fixes (the console's server-side sign-out
read by the JSON API, the cookie authorizer's key set). Each test is one flow (its docstring:
the flow, what was observed, the invariant); each fails on main (b623f83):

- a signed-out console token still decides through the JSON API when sent without ``Bearer``;
- a signed-out attendant's console token still answers a customer (POST /conversas/{id}/respostas);
- every token naming an unknown ``kid`` makes the cookie authorizer fetch the key set again;
- a refund that ran before a crash, rerun after its tool is stopped: its consumed approval voided
  and the customer told nothing was done, though the money moved."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

from autorizar_console.handler import ConsoleAuthorizer
from autorizar_console.verification import KeySet, b64url
from cadencia_shared.approvals import ApprovalStatus
from cadencia_shared.ledger import ConversationStatus, SwitchState, SwitchStore
from decidir_aprovacao.console_session import csrf_token
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, fixture
from .support.orchestrators import CountingInvoker, build
from .test_attack_cross_features import _approved_run_dies_before_commit, _form_post
from .test_operator_api import USERS, _ledger, _status, _waiting, api, call, token  # noqa: F401 - fixture


def _decide_with_raw_authorization(api, approval: str, authorization: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"decisao": "aprovar", "justificativa": "conferido com o cliente"}).encode()
    req = urllib.request.Request(f"{api.url}/aprovacoes/{approval}/decisao", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": authorization})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def test_a_signed_out_token_sent_without_the_bearer_prefix_decides_nothing(local_stack, erp, gateway, api):
    """Flow: ana signs in to the console and signs out (POST /console/sair with her CSRF token:
    303, ``saida-console#`` recorded). A copy of her cookie's value taken before is sent to the
    JSON API's POST /aprovacoes/{id}/decisao as ``Authorization: <token>`` — no ``Bearer``
    prefix, which the JWT authorizer accepts (API Gateway's HTTP API JWT authorizer, and the
    local stack's adapter, ``api_adapter.claims``: "with or without the Bearer prefix").
    ``api.person()`` reads the ended session through ``sign_outs.bearer_token``, which only
    knows ``Bearer …`` and answers None, so ``refuse_signed_out`` checks nothing.

    Invariant (ef84ba5/b623f83): "a cookie copied before sign-out decides nothing after it",
    through the JSON API too. Observed: 200 ``aprovada`` and the R$ 120 debited."""
    conv, approval = _waiting(local_stack, 120.0)
    session = token(api, "ana")
    status, location = _form_post(api, "/console/sair", session, {"csrf": csrf_token(session)})
    assert (status, location) == (303, "/console/entrar")
    status, body = _decide_with_raw_authorization(api, approval, session)
    assert status == 401, f"the signed-out token decided without the Bearer prefix: {status} {body}"
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def _unsigned_token(kid: str) -> str:
    header = b64url(json.dumps({"alg": "RS256", "kid": kid}).encode())
    claims = b64url(json.dumps({"token_use": "access"}).encode())
    return f"{header}.{claims}.{b64url(b'x' * 256)}"


def test_tokens_naming_unknown_keys_do_not_make_the_authorizer_fetch_the_key_set_each_time():
    """Flow: an anonymous client sends the console 50 requests, each with a ``cadencia_sessao``
    cookie whose header names a fresh random ``kid`` (nothing signed: the kid is read before
    any signature). ``verification.verify_with`` answers "unknown key" by re-fetching
    ``{issuer}/.well-known/jwks.json`` — for every such token, with no memory of the last
    refetch, so the authorizer makes one outbound HTTPS call to Cognito (3 s timeout) per
    unauthenticated request.

    Invariant (handler.py's docstring: "fetched once per cold start (and once more on an
    unknown kid)"): an attacker's unknown kids cannot drive the key-set fetches; a refetch is
    bounded (here: the clock never moves, so at most the first fetch and one refresh).
    Observed: 51 fetches for 50 requests."""
    fetches: list[str] = []

    def fetch(url: str) -> list[dict[str, Any]]:
        fetches.append(url)
        return [{"kty": "RSA", "kid": "the-pools-key", "n": b64url(b"\xc1" * 256), "e": "AQAB"}]

    authorizer = ConsoleAuthorizer(KeySet("https://cognito-idp.sa-east-1.amazonaws.com/pool", fetch),
                                   frozenset({"console"}), now=lambda: 1_800_000_000.0)
    for n in range(50):
        kid = base64.b32encode(n.to_bytes(4, "big")).decode()
        assert authorizer.decide({"cookies": [f"cadencia_sessao={_unsigned_token(kid)}"]}) == {"isAuthorized": False}
    assert len(fetches) <= 2, f"{len(fetches)} key-set fetches for 50 anonymous requests with unknown kids"


def test_a_refund_that_ran_before_a_crash_is_never_voided_nor_told_stopped_when_the_tool_is_then_stopped(
        local_stack, erp, gateway, api):
    """Flow: an approved R$ 120 refund is resumed; the sealed call runs (R$ 120 debited, the
    approval ``consumida``) and the process dies before the conversation's commit. A supervisor
    then stops the refund tool (``interruptor#emitir_reembolso`` = desligada), and the resume
    runs again, as the decision's retry would. The switch refuses the call (``erro``
    ``ferramenta_desligada``), and ``resume._refused_as`` reads that as "this round's call did
    not run": ``void_approval(consumed_too=True)`` (b623f83) voids the CONSUMED approval whose
    call did run, and the customer is told "aprovada, mas ... nada foi feito".

    Invariant (resume.py: ``consumed_too`` only "when its call is proven not to have run"; the
    customer is never told nothing moved when money moved). Observed: one debit of R$ 120, the
    approval ``anulada``, reason ``aprovada_ferramenta_desligada``, and the reply says nothing
    was done."""
    conv, approval, resumer, _ = _approved_run_dies_before_commit(local_stack, gateway)
    assert _status(local_stack, approval) is ApprovalStatus.CONSUMED
    switches = SwitchStore(_ledger(local_stack).table)
    switches.set_switch("emitir_reembolso", SwitchState.STOPPED, subject=USERS["davi"].sub, name="davi",
                        reason="gateway em manutenção")
    try:
        again = resumer.resume(approval, Deadline.after(60))
        assert [d["valor"] for d in gateway.debits_for(conv)] == ["120.00"]
        after = _status(local_stack, approval)
        assert after is ApprovalStatus.CONSUMED, f"the approval whose refund ran was {after.value}: {again}"
        assert again.reason != "aprovada_ferramenta_desligada", f"told nothing was done after a debit: {again.reply}"
    finally:
        switches.set_switch("emitir_reembolso", SwitchState.RUNNING, subject=USERS["davi"].sub, name="davi",
                            reason="fim do teste")


def test_a_signed_out_attendants_token_never_answers_a_customer(local_stack, api):
    """Flow: carla (``atendentes``, one of the console's groups) signs in to the console and
    signs out (POST /console/sair with her CSRF token: 303, ``saida-console#`` recorded). A copy
    of her cookie's value taken before is sent as ``Authorization: Bearer`` to the human-reply
    API, POST /conversas/{id}/respostas (same JWT authorizer, same app client), for a
    conversation waiting for a person. ``human_reply_api.reply`` acts as the person the token
    names and never reads ``saida-console#`` (only the decision function's ``api.person()``,
    ``switches_api`` and the console's pages do).

    Invariant (ef84ba5/b623f83): "a cookie copied before sign-out decides nothing after it";
    every route that acts as a person refuses an ended session (401 ``sessao_encerrada``).
    Observed: 200, the text sent to the customer as carla (``ATENDENTE_RESPONDEU``)."""
    ledger = _ledger(local_stack)
    conv = f"api-{uuid.uuid4().hex[:10]}"
    orch, _ = build(ScriptedModel(fixture("refusal")), ledger, CountingInvoker())
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                            mensagem="quero falar com alguém"), Deadline.after(60))
    assert ledger.read_conversation(conv).status is ConversationStatus.WAITING_HUMAN
    session = token(api, "carla")
    status, location = _form_post(api, "/console/sair", session, {"csrf": csrf_token(session)})
    assert (status, location) == (303, "/console/entrar")
    status, body = call(api, "POST", f"/conversas/{conv}/respostas", bearer=session,
                        body={"texto": "Seu reembolso foi aprovado, pode confiar."})
    assert status == 401, f"the signed-out attendant's token answered the customer: {status} {body}"
    assert ledger.read_conversation(conv).messages[-1]["role"] == "user"  # nothing written

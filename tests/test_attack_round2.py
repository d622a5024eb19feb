"""Second outside attack round on the recent changes (the edge's switch read, a lower amount
closing its original, SEAL naming an approval, the unusable-approval hand-off, the console's
server-side sign-out), on the local stack. Each test is one flow (its docstring: the flow, what
was observed, the invariant); each fails on main (168e372):

- a signed-out console token still decides through the JSON API (same app client);
- a signed-out console token still decides with its signature's unused base64url bits changed;
- the same refund asked again with a whole-number amount (``150``) is refused by SEAL 2004;
- the same lower-amount decision sent twice voids its own approval (nothing runs);
- an approved refund stopped at the tool's edge is told "could not confirm" and its approval
  left consumed, unlike the same stop seen by the orchestrator's control."""

from __future__ import annotations

import contextlib
from typing import Any

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from decidir_aprovacao.console_session import csrf_token
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .test_attack_cross_features import _form_post
from .test_operator_api import _status, _waiting, api, decide, token  # noqa: F401 - fixture

REFUND = "emitir_reembolso"


def test_a_signed_out_console_token_decides_nothing_through_the_json_api(local_stack, erp, gateway, api):
    """Flow: ana signs in to the console (cookie ``cadencia_sessao`` = her access token) and signs
    out (POST /console/sair with her CSRF token: 303, the token's hash recorded as
    ``saida-console#``). A copy of the cookie's value taken before sign-out is then sent as
    ``Authorization: Bearer`` to the JSON API's POST /aprovacoes/{id}/decisao — the JWT
    authorizer accepts the same app client's access token (infra/operator_api.py: one
    ``cadencia-console`` client for both authorizers).

    Invariant (ef84ba5): "a cookie copied before sign-out decides nothing after it". Observed:
    the JSON API never reads ``saida-console#``: the ended session's token approves (200
    ``aprovada``) and R$ 120 is debited."""
    conv, approval = _waiting(local_stack, 120.0)
    session = token(api, "ana")
    status, location = _form_post(api, "/console/sair", session, {"csrf": csrf_token(session)})
    assert (status, location) == (303, "/console/entrar")
    status, body = decide(api, approval, session)
    assert status == 401, f"the signed-out session's token decided through the JSON API: {status} {body}"
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_the_same_refund_asked_again_with_a_whole_number_amount_is_not_refused_by_seal(
        mocked_aws, gateway, tools):
    """Flow: the model asks for a R$ 150 refund as the JSON number ``150`` (an integer: how a
    whole amount is most naturally written; the tool's types accept it). It waits on an approval
    (threshold R$ 100); a person approves; the resume runs it (one debit, ``consumida``). Next
    turn the model asks for the very same refund again, again ``150``. The gate passes it on the
    consumed approval and registers it with ``sealing.name_approval`` under the digest of the
    CANONICAL arguments (``valor`` 150.00 -> ``150.0``); the envelope is sealed over the event's
    raw arguments (``150``), whose digest differs, so the lookup misses and the envelope names no
    approval.

    Invariant (fa521df): a call the gate passed on an approval is answered by the refund's key,
    never ``selo_recusado``, whatever JSON spelling of the same amount the model used. Observed:
    the edge refuses it (selo_recusado, 2004) — the fa521df fix holds only for ``150.0``."""
    from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
    from .support.orchestrators import build
    from .test_approval_lifecycle import POLICY as LIFECYCLE_POLICY
    from .test_approval_lifecycle import _approval, _conv, _decide, _invoker, _turn

    asked = {"pedidoId": "4821", "valor": 150}
    ledger, conv = mocked_aws["ledger"], _conv("inteiro")
    invoker = _invoker(tools)
    first, _ = build(ScriptedModel(tool_use(REFUND, asked), text_reply("x")), ledger, invoker, **LIFECYCLE_POLICY)
    first.handle(_turn(conv), Deadline.after(60))
    approval = _approval(ledger, conv)
    _decide(ledger, approval)
    assert Resumer.of(first).resume(approval, Deadline.after(60)).reason == "aprovada_executada"
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.CONSUMED

    model = ScriptedModel(tool_use(REFUND, asked), text_reply("ok"))
    again, _ = build(model, ledger, invoker, **LIFECYCLE_POLICY)
    again.handle(_turn(conv, "e o reembolso?"), Deadline.after(60))
    last = model.requests[-1]["messages"][-1]
    results = [b["content"] for b in last["content"] if isinstance(last["content"], list)
               and b.get("type") == "tool_result"]
    assert results, "the second refund call was never answered"
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["150.00"]
    assert "selo_recusado" not in results[0], results[0]


def test_the_same_lower_amount_decision_sent_twice_never_voids_its_own_approval(
        local_stack, erp, gateway, api, monkeypatch):
    """Flow (one person, two processes: a double-submitted console form, or the API client's
    retry after a timeout): R$ 140 waits on an approval (threshold R$ 100). ana approves R$ 110,
    still above the automatic limit, below the two-person one (R$ 150). Her second request reads
    the original ``pendente``; in that instant her first request completes: the R$ 110 request
    is created and approved by her, the original closed (``anulada``), the resume handed the
    R$ 110 request. The second request goes on from its read: the R$ 110 request is the one it
    would create (same arguments), already approved by ana ("this person's same decision again"),
    so it finishes the replacement: the original's close (``only_pending``, 058ff2e) finds it
    ``anulada``, and the new rule voids the lower request, ana's own approval, and refuses.

    Invariant: the same decision sent twice decides once: one debit of R$ 110 and the customer
    told R$ 110. Observed: the R$ 110 approval is voided by its own duplicate before its resume
    runs: the resume finds it unusable and hands the conversation to a person ("Nenhum valor foi
    movimentado"), 0 debits, while ana's first page said "Aprovado: a chamada vai rodar"."""
    from cadencia_shared import approval_policy
    from cadencia_shared.identity import APPROVERS, Person
    from decidir_aprovacao import actions
    from orchestrator.invokers.local import InProcessInvoker

    from .test_attack_cross_features import _resumer
    from .test_operator_api import POLICY, USERS, _ledger

    conv, approval = _waiting(local_stack, 140.0)
    ledger = _ledger(local_stack)
    policy = approval_policy.PolicySettings.from_env(POLICY)
    ana = Person(USERS["ana"].sub, "ana", frozenset({APPROVERS}))
    to_resume: list[str] = []
    real_get = ApprovalStore.get
    landed: list[str] = []

    def get_then_first_request_completes(self: ApprovalStore, approval_id: str) -> Any:
        record = real_get(self, approval_id)
        if not landed and approval_id == approval:
            landed.append("primeiro")
            actions.decide(ledger, approval, who=ana, approve=True, justification="conferido pela ana",
                           amount_text="110.00", policy=policy, resume=to_resume.append)
        return record

    monkeypatch.setattr(ApprovalStore, "get", get_then_first_request_completes)
    with contextlib.suppress(actions.Refused):
        actions.decide(ledger, approval, who=ana, approve=True, justification="conferido pela ana",
                       amount_text="110.00", policy=policy, resume=to_resume.append)
    monkeypatch.setattr(ApprovalStore, "get", real_get)
    assert landed and to_resume, "the first request did not complete"
    lower = to_resume[0]
    lower_after = _status(local_stack, lower)

    resumer, _ = _resumer(local_stack, InProcessInvoker(local_stack.function_environments()))
    replies = [resumer.resume(a, Deadline.after(60)) for a in to_resume]
    debits = [d["valor"] for d in gateway.debits_for(conv)]
    told = [r.reply for r in replies if r.reply]
    assert lower_after is not ApprovalStatus.VOIDED, (
        f"ana's own R$ 110 approval was voided by her duplicate request: debits {debits}, told {told}")
    assert debits == ["110.00"], (debits, told)
    assert "R$ 110,00" in (told[-1] if told else ""), told


def _same_signature_other_text(session: str) -> str:
    """The token with its signature's last base64url character changed in the bits that encode
    nothing (an RS256 signature is 256 bytes: its last character carries 4 unused bits)."""
    import base64

    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    other = session[:-1] + alphabet[alphabet.index(session[-1]) ^ 1]

    def raw(token: str) -> bytes:
        part = token.rsplit(".", 1)[1]
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert other != session and raw(other) == raw(session)
    return other


def test_a_signed_out_session_replayed_with_its_signature_respelled_decides_nothing(
        local_stack, erp, gateway, api):
    """Flow: ana signs in to the console and signs out (POST /console/sair: 303, the token's
    SHA-256 recorded as ``saida-console#``). A copy of her cookie taken before is replayed with
    its signature's last base64url character changed in the bits that encode nothing: the same
    token to the cookie authorizer (``verification.unb64url`` decodes both spellings to the same
    256 bytes, so the signature verifies), a different string to ``sign_outs`` (another SHA-256,
    no ``saida-console#`` item). The CSRF token is the HMAC keyed by that string, which the
    holder of the copy computes.

    Invariant (ef84ba5): "a cookie copied before sign-out decides nothing after it". Observed:
    the respelled copy approves the R$ 120 request (303 to ``?resultado=aprovada``) and the
    money moves."""
    conv, approval = _waiting(local_stack, 120.0)
    session = token(api, "ana")
    status, location = _form_post(api, "/console/sair", session, {"csrf": csrf_token(session)})
    assert (status, location) == (303, "/console/entrar")
    copy = _same_signature_other_text(session)
    status, location = _form_post(api, f"/console/aprovacoes/{approval}/decisao", copy,
                                  {"csrf": csrf_token(copy), "decisao": "aprovar",
                                   "justificativa": "conferido com o cliente"})
    assert status in (401, 403), f"the signed-out session decided with its signature respelled: {status} {location}"
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_an_approved_refund_stopped_at_the_tools_edge_is_told_and_closed_as_a_stop(local_stack, erp, gateway, api):
    """Flow: R$ 120 waits on an approval; a person approves; the resume's switch control reads
    ``ligada``, then (the feasibility read, through the invoker) a supervisor stops
    ``emitir_reembolso``; the gate consumes the approval and the sealed refund reaches the tool's
    edge, which reads the switch again and answers ``ferramenta_desligada`` (2495ebb): nothing ran.

    Invariant: the same stop is told and closed the same way wherever it is seen. Seen by the
    orchestrator's control, the resume answers ``aprovada_ferramenta_desligada`` ("a operação
    está temporariamente suspensa ... nada foi feito") and voids the approval "so it cannot
    authorise the call later". Observed: the edge's refusal is the JSON object
    ``erro: {codigo: ferramenta_desligada}``, which ``resume._refused_as`` (comparing ``erro``
    to the string) does not recognise: the resume answers ``aprovada_nao_executada``, tells the
    customer "não consegui confirmar a emissão agora" about a refund known not to have run, and
    leaves the approval ``consumida`` — a consumed approval whose call never ran, which the gate
    passes again for the same call ("answered by its idempotency key": there is none)."""
    from cadencia_shared.ledger import SwitchState, SwitchStore

    from .test_attack_cross_features import _approve_in_ledger, _resumer, _SwitchFlippingInvoker
    from .test_operator_api import USERS, _ledger

    try:
        conv, approval = _waiting(local_stack, 120.0)
        _approve_in_ledger(local_stack, approval)
        invoker = _SwitchFlippingInvoker(local_stack)
        resumer, _ = _resumer(local_stack, invoker)
        resumed = resumer.resume(approval, Deadline.after(60))
        assert [(a.get("erro") or {}).get("codigo") for a in invoker.refund_answers] == ["ferramenta_desligada"]
        assert gateway.debits_for(conv) == []
        after = _status(local_stack, approval)
        assert (resumed.reason, after) == ("aprovada_ferramenta_desligada", ApprovalStatus.VOIDED), (
            resumed.reason, after.value, resumed.reply)
    finally:
        SwitchStore(_ledger(local_stack).table).set_switch(REFUND, SwitchState.RUNNING, subject=USERS["davi"].sub,
                                                           name="davi", reason="fim do teste")

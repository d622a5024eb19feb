"""SEAL and the operators' console crossed with each other and with older features
(approvals, the tool kill switches, crash recovery), on the local stack: the real refund
Lambda handler at its sealed edge, the real PostgreSQL and gateway (every debit counted on
the gateway itself), the operators' API with its cookie authorizer.

Threshold R$ 100 (``APROVACAO_LIMITE_REAIS``), two people above R$ 150 (test_operator_api's POLICY).

Each test is one flow an attacker tried (its docstring: the flow, what was observed, the
invariant). Five were defects, now fixed: a switch flipped between the orchestrator's read and
the invoke (the tool's edge reads it again), a console decision replayed after sign-out (the
ended session is recorded), a lower amount decided on a stale read, the same refund asked again
after its approved run, the unusable-approval hand-off after money moved. Two guard crossings
that held."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.catalog import ToolSpec
from cadencia_shared.ledger import ConversationStatus, SwitchState, SwitchStore
from decidir_aprovacao.console_session import csrf_token
from orchestrator.invokers import Invocation
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from orchestrator.settings import OrchestratorSettings
from scripts.aprovar import local_environment

from .test_operator_api import POLICY, USERS, _ledger, _status, _waiting, api, decide, token  # noqa: F401 - fixture

REFUND = "emitir_reembolso"
STATUS = "consultar_status_pedido"


def _form_post(api, path: str, session: str, fields: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(f"{api.url}{path}", data=urllib.parse.urlencode(fields).encode(), method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded",
                                          "Cookie": f"cadencia_sessao={session}"})
    opener = urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(req, timeout=120) as resp:
            return int(resp.status), resp.headers.get("Location", "")
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Location", "") or ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


def _resumer(local_stack, invoker) -> tuple[Resumer, Any]:
    env = {**local_environment(local_stack), **POLICY}
    settings = OrchestratorSettings.from_env({**env, "TOOL_INVOKER": "local", "LEDGER_TABLE": local_stack.ledger_table})
    ledger = _ledger(local_stack)
    return Resumer.build(settings, ledger, invoker), ledger


def _approve_in_ledger(local_stack, approval: str) -> None:
    ApprovalStore(_ledger(local_stack)).decide(approval, approve=True, approver=USERS["ana"].sub,
                                               justification="conferido", allowed_approvers=frozenset(
                                                   {USERS["ana"].sub}))


def _approved_run_dies_before_commit(local_stack, gateway) -> tuple[str, str, Resumer, Any]:
    """An approved R$ 120 refund resumed: debited, then the process dies before the commit."""
    conv, approval = _waiting(local_stack, 120.0)
    _approve_in_ledger(local_stack, approval)
    resumer, ledger = _resumer(local_stack, InProcessInvoker(local_stack.function_environments()))
    real_commit = ledger.commit_conversation
    crashes: list[int] = []

    def crash_once(*args: Any, **kwargs: Any) -> Any:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("processo morto antes do commit")
        return real_commit(*args, **kwargs)

    ledger.commit_conversation = crash_once  # type: ignore[method-assign]
    with contextlib.suppress(RuntimeError):
        resumer.resume(approval, Deadline.after(60))
    assert crashes and [d["valor"] for d in gateway.debits_for(conv)] == ["120.00"]
    return conv, approval, resumer, ledger


class _SwitchFlippingInvoker:
    """The in-process invoker; at the first order read (the feasibility check's or the gate's,
    made through the invoker after the switch control has read the switch), a supervisor
    stops the refund tool — as a console POST landing in that instant would."""

    def __init__(self, local_stack) -> None:
        self.inner = InProcessInvoker(local_stack.function_environments())
        self.switches = SwitchStore(_ledger(local_stack).table)
        self.flipped = False
        self.refund_answers: list[dict[str, Any]] = []

    def invoke(self, tool: ToolSpec, event: dict[str, Any]) -> Invocation:
        if tool.name == STATUS and not self.flipped:
            self.flipped = True
            self.switches.set_switch(REFUND, SwitchState.STOPPED, subject=USERS["davi"].sub, name="davi",
                                     reason="gateway em manutenção")
        invocation = self.inner.invoke(tool, event)
        if tool.name == REFUND:
            self.refund_answers.append(invocation.payload or {})
        return invocation


def test_a_refund_stopped_after_the_switch_read_but_before_the_sealed_invoke_never_reaches_the_tool(
        local_stack, erp, gateway, api):
    """Flow: a refund of R$ 120 waits on an approval; a person approves it; the resume runs the
    approved call through the control chain: the switch control reads ``ligada``, then the
    feasibility check reads the order through the invoker, and in that instant a supervisor
    stops ``emitir_reembolso`` (the console's POST /console/interruptores). The gate consumes
    the approval and the sealed refund is invoked.

    Invariant (docs/decisions/tool-switches.md): once the switch says ``desligada``, no refund
    reaches the tool's logic, its credentials or the gateway — a call already on its way when
    the switch flips is refused by the tool's own edge (``ferramenta_desligada``)."""
    try:
        conv, approval = _waiting(local_stack, 120.0)
        _approve_in_ledger(local_stack, approval)
        invoker = _SwitchFlippingInvoker(local_stack)
        resumer, _ = _resumer(local_stack, invoker)
        resumer.resume(approval, Deadline.after(60))
        assert invoker.flipped
        assert SwitchStore(_ledger(local_stack).table).tool_switch(REFUND).state is SwitchState.STOPPED
        assert gateway.debits_for(conv) == [], "a stopped tool's call reached the gateway"
        # No read of a switch and an invoke are one atomic step: a stop landing between them is
        # answered by the tool's own edge, before its logic, credentials or gateway.
        assert [(a.get("ok"), (a.get("erro") or {}).get("codigo")) for a in invoker.refund_answers] in (
            [], [(False, "ferramenta_desligada")]), invoker.refund_answers
    finally:
        SwitchStore(_ledger(local_stack).table).set_switch(REFUND, SwitchState.RUNNING, subject=USERS["davi"].sub,
                                                           name="davi", reason="fim do teste")


def test_a_console_decision_replayed_after_sign_out_decides_nothing(local_stack, erp, gateway, api):
    """Flow: ana signs in to the console (cookie ``cadencia_sessao`` = her access token), opens a
    request (the form carries the session's CSRF token), and signs out (POST /console/sair, which
    answers 303 and clears the cookie). The exact decision POST — same cookie, same CSRF token —
    is then replayed (a captured request, a shared machine's history).

    Invariant: after sign-out, that session's cookie and CSRF token decide nothing (the request
    stays pending, 0 debits). Observed: sign-out only asks the browser to drop the cookie; the
    token and its CSRF stay valid until the token expires (an hour), and the replay approves and
    moves money."""
    conv, approval = _waiting(local_stack, 120.0)
    session = token(api, "ana")
    csrf = csrf_token(session)
    status, location = _form_post(api, "/console/sair", session, {"csrf": csrf})
    assert (status, location) == (303, "/console/entrar")
    status, _ = _form_post(api, f"/console/aprovacoes/{approval}/decisao", session,
                           {"csrf": csrf, "decisao": "aprovar", "justificativa": "conferido com o cliente"})
    assert status in (401, 403), f"the replay after sign-out was answered {status}"
    assert _status(local_stack, approval) is ApprovalStatus.PENDING
    assert gateway.debits_for(conv) == []


def test_a_lower_amount_below_the_automatic_limit_runs_once_and_leaves_no_open_approval(
        local_stack, erp, gateway, api):
    """Flow: R$ 120 waits on an approval (threshold R$ 100); an approver approves a LOWER amount,
    R$ 90 — below the automatic limit — from the API (the console's own action code). The lower
    request replaces the original; the resume runs the sealed call with the new arguments (the
    envelope names the lower approval; the edge's argument hash is over R$ 90).

    Invariant: exactly one debit of R$ 90, the customer told R$ 90, the original voided, and no
    approval of the conversation left open (approved and unconsumed) to authorise the call later."""
    conv, approval = _waiting(local_stack, 120.0)
    status, body = decide(api, approval, "ana", valorAprovado="90.00")
    assert (status, body.get("resultado")) == (200, "aprovada"), body
    lower = body["aprovacao"]["aprovacaoId"]
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["90.00"]
    assert "R$ 90,00" in (api.resumed[-1].reply or ""), api.resumed[-1]
    assert _status(local_stack, approval) is ApprovalStatus.VOIDED
    assert _status(local_stack, lower) is not ApprovalStatus.APPROVED, "an approved call ran without consuming it"


def test_an_approved_refund_rerun_after_a_crash_before_the_commit_debits_once_and_says_so(
        local_stack, erp, gateway, api):
    """Flow: an approved R$ 120 refund is resumed; the sealed call runs (debit) and the process
    dies before the conversation's commit (the lease is given back). The resume runs again, as the
    decision's retry would: a NEW SEAL session (the first one is closed), an envelope naming the
    now CONSUMED approval.

    Invariant: the edge accepts the consumed approval, the refund's idempotency key answers it:
    one debit in all, the conversation active again, and the customer told it was processed."""
    conv, approval, resumer, _ = _approved_run_dies_before_commit(local_stack, gateway)
    assert _status(local_stack, approval) is ApprovalStatus.CONSUMED
    again = resumer.resume(approval, Deadline.after(60))
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["120.00"]
    assert (again.status, again.reason) == (ConversationStatus.ACTIVE.value, "aprovada_executada"), again


def test_a_lower_amount_decided_on_a_stale_read_never_voids_another_persons_approval(
        local_stack, erp, gateway, api, monkeypatch):
    """Flow (two approvers at once, as two processes interleave): R$ 120 waits on an approval.
    bruno opens the decision and his read sees it ``pendente``; at that instant ana's approval
    of the full R$ 120 lands (the decision function hands it to the resume). bruno's decision,
    a LOWER amount (R$ 90), goes on from his stale read: it creates the R$ 90 request, approves
    it, and closes the one it replaces — ana's, already ``aprovada`` — as ``anulada``. Both
    decisions are handed to the resume; ana's arrives first (as it was decided first).

    Invariant: a request another person has already decided is never overridden by a decision
    made on a stale read (bruno's is refused as already decided, as a same-amount approval
    would be), and the customer is never told "approved" about a call that did not run: here
    exactly one debit, and the reply matches it. Observed: ana's request ends ``anulada`` (the
    replacement's close takes an ``aprovada`` record too), her resume finds it unusable and hands
    the conversation to a person, bruno's then finds no conversation waiting: two people approved,
    0 debits, and the page told each of them "Aprovado: a chamada vai rodar". (Not a narrow
    window: two OS processes deciding at once behind a barrier — ana the full amount, bruno R$ 90
    — ended 12 of 12 times with both answered ``aprovada`` and ana's request ``anulada``; resumed
    bruno's first, R$ 90 runs and ana's approval is silently dropped.)"""
    from cadencia_shared import approval_policy
    from cadencia_shared.identity import APPROVERS, Person
    from decidir_aprovacao import actions

    conv, approval = _waiting(local_stack, 120.0)
    ledger = _ledger(local_stack)
    policy = approval_policy.PolicySettings.from_env(POLICY)
    ana = Person(USERS["ana"].sub, "ana", frozenset({APPROVERS}))
    bruno = Person(USERS["bruno"].sub, "bruno", frozenset({APPROVERS}))
    to_resume: list[str] = []
    real_get = ApprovalStore.get
    landed: list[str] = []

    def get_then_ana_decides(self: ApprovalStore, approval_id: str) -> Any:
        record = real_get(self, approval_id)
        if not landed and approval_id == approval:
            landed.append("ana")  # ana's decision lands right after bruno's read
            actions.decide(ledger, approval, who=ana, approve=True, justification="conferido pela ana",
                           amount_text=None, policy=policy, resume=to_resume.append)
        return record

    monkeypatch.setattr(ApprovalStore, "get", get_then_ana_decides)
    try:
        actions.decide(ledger, approval, who=bruno, approve=True, justification="conferido pelo bruno",
                       amount_text="90.00", policy=policy, resume=to_resume.append)
        bruno_refused = False
    except actions.Refused:
        bruno_refused = True
    monkeypatch.setattr(ApprovalStore, "get", real_get)
    original_after = _status(local_stack, approval)

    resumer, _ = _resumer(local_stack, InProcessInvoker(local_stack.function_environments()))
    replies = [resumer.resume(a, Deadline.after(60)) for a in to_resume]
    debits = [d["valor"] for d in gateway.debits_for(conv)]
    told = [r.reply for r in replies if r.reply]
    assert bruno_refused and original_after is not ApprovalStatus.VOIDED, (
        f"ana's approval was voided by bruno's stale decision: original {original_after.value}, "
        f"debits {debits}, told {told}")
    assert len(debits) == 1, (debits, told)


def test_the_same_refund_asked_again_after_its_approved_run_is_answered_by_its_key_not_refused_by_seal(
        mocked_aws, gateway, tools):
    """Flow: R$ 150 (threshold R$ 100) waits on an approval; a person approves it; the resume
    runs it (one debit, the approval ``consumida``). In the customer's next turn the model asks
    for exactly the same refund again. The confirmation gate passes it on the consumed approval —
    its documented rule: "consumida ─► pass (the same call again: the refund's idempotency key
    answers it, so no second debit can follow)" — and the loop's sealed invoke carries an
    envelope that names no approval (only the resume's names one).

    Invariant: the call the gate passed reaches the refund's logic and its idempotency key
    answers it (already done, nothing new moved): no ``selo_recusado`` for a call this very turn
    signed and the gate authorised. Observed: the tool's edge refuses it 2004 (above the limit,
    no approval named): the model reads "Chamada recusada: não foi autorizada por este
    atendimento (selo)" instead of "already refunded", and ``ChamadasSeladasRecusadas`` counts a
    forgery that was a legitimate call."""
    from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
    from .support.orchestrators import build
    from .test_approval_lifecycle import POLICY as LIFECYCLE_POLICY
    from .test_approval_lifecycle import REFUND as ASKED
    from .test_approval_lifecycle import _approval, _ask, _conv, _decide, _invoker, _turn

    ledger, conv = mocked_aws["ledger"], _conv("de-novo")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    _decide(ledger, approval)
    assert Resumer.of(orch).resume(approval, Deadline.after(60)).reason == "aprovada_executada"
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.CONSUMED

    model = ScriptedModel(tool_use(REFUND, ASKED), text_reply("ok"))
    again, _ = build(model, ledger, invoker, **LIFECYCLE_POLICY)
    again.handle(_turn(conv, "e o reembolso?"), Deadline.after(60))
    # The request after the scripted tool_use carries its result (the ids come from a
    # process-wide counter: not named here).
    last = model.requests[-1]["messages"][-1]
    results = [b["content"] for b in last["content"] if isinstance(last["content"], list)
               and b.get("type") == "tool_result"]
    assert results, "the second refund call was never answered"
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["150.00"]
    assert "selo_recusado" not in results[0], results[0]


def test_an_approved_refund_rerun_after_a_crash_and_after_its_expiry_never_tells_nothing_moved(
        local_stack, erp, gateway, api):
    """Flow: an approved R$ 120 refund is resumed; the sealed call runs (R$ 120 debited) and the
    process dies before the conversation's commit (the lease is given back; the approval is
    ``consumida``; the conversation still waits on it). The resume's retry comes after the
    approval's validity (``APROVACAO_VALIDADE_S``) has passed — a late retry of the decision's
    resume (injected clock, no waiting).

    Invariant: what the customer reads about money is true: R$ 120 moved, so never "Nenhum
    valor foi movimentado"; one debit in all. Observed: the gate finds the consumed record
    expired, refuses it as unusable and hands off with ``texts.APPROVAL_UNUSABLE`` — "...não pôde
    ser usada (expirou...) ... Nenhum valor foi movimentado." — while the gateway holds the
    R$ 120 debit of that very approval."""
    import time

    conv, approval, resumer, ledger = _approved_run_dies_before_commit(local_stack, gateway)
    record = ApprovalStore(ledger).get(approval)
    assert record.status is ApprovalStatus.CONSUMED
    late_s = (record.expires_at_ms - ledger.now_ms()) / 1000 + 60
    ledger.table.clock = lambda: time.time() + late_s
    again = resumer.resume(approval, Deadline.after(60))
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["120.00"]
    assert "Nenhum valor foi movimentado" not in (again.reply or ""), (again.reason, again.reply)

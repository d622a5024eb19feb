"""An approval's whole life, end to end through the orchestrator (the real SDK with a
scripted model, the real ledger on moto, the real refund Lambda handler, the real
PostgreSQL and gateway — every debit counted on the gateway itself):

- what anyone is shown about an approval (operator listing and showing, the customer's
  message, the audit) is derived from the bound arguments, and a record whose stored
  copy disagrees with them is refused wherever it is read;
- a cancellation voids the conversation's open approvals, and a decision on a cancelled
  or handed-off conversation is refused;
- a request that expires undecided is closed, the customer is told, and the
  conversation returns to the agent (injected clock, never a real wait).

Threshold R$ 100 (APROVACAO_LIMITE_REAIS), so R$ 150 on order 4821 needs a person."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import ConversationStatus, ItemType, Ledger, approval_pk
from decidir_aprovacao.logic import handle as decision_entry
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

OPERATOR = "ana.operadora"
APPROVERS = frozenset({OPERATOR})
POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": OPERATOR}
REFUND = {"pedidoId": "4821", "valor": 150.0}


def _conv(label: str) -> str:
    return f"ciclo-{label}-{uuid.uuid4().hex[:8]}"


def _turn(conv: str, text: str = "quero o reembolso") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _invoker(tools) -> CountingInvoker:
    return CountingInvoker(InProcessInvoker({name: tools.environment(spec) for name, spec in TOOLS.items()}))


def _ask(ledger: Ledger, invoker, conv: str, **env: str):
    """A customer message whose model asks for the refund; returns (reply, orchestrator)."""
    model = ScriptedModel(tool_use("emitir_reembolso", REFUND), text_reply("(não deveria ser pedido)"))
    orch, _ = build(model, ledger, invoker, **{**POLICY, **env})
    return orch.handle(_turn(conv), Deadline.after(60)), orch


def _approval(ledger: Ledger, conv: str) -> str:
    (item,) = list(ledger.history(conv, item_type=ItemType.APPROVAL))
    return item["aprovacaoId"]


def _decide(ledger: Ledger, approval: str, resumed: list[str] | None = None) -> dict:
    """The decision Lambda's rules (decidir_aprovacao.logic), approving as the operator."""
    return decision_entry(_decision(approval), ledger, approvers=APPROVERS,
                          resume=(resumed if resumed is not None else []).append)


def _decision(approval: str):
    from cadencia_shared.models import DecisionRequest

    return DecisionRequest.model_validate({"acao": "decidir", "aprovacaoId": approval, "decisao": "aprovar",
                                           "aprovador": OPERATOR, "justificativa": "conferido"})


def _listing(ledger: Ledger) -> dict:
    from cadencia_shared.models import PendingListRequest

    return decision_entry(PendingListRequest.model_validate({"acao": "listar"}), ledger, approvers=APPROVERS,
                          resume=lambda _: None)


def _showing(ledger: Ledger, approval: str) -> dict:
    from cadencia_shared.models import ShowRequest

    return decision_entry(ShowRequest.model_validate({"acao": "mostrar", "aprovacaoId": approval}), ledger,
                          approvers=APPROVERS, resume=lambda _: None)


def _audit(ledger: Ledger, conv: str) -> list[dict]:
    return list(ledger.history(conv, item_type=ItemType.AUDIT))


def _details(record: dict) -> dict:
    details = record["detalhes"]
    return json.loads(details) if isinstance(details, str) else details


def _set_stored_amount(mocked_aws, ledger: Ledger, approval: str, amount: str) -> None:
    """Someone with table access edits the one field shown to people (not the arguments)."""
    mocked_aws["dynamodb"].update_item(TableName=ledger.table_name, Key={"pk": {"S": approval_pk(approval)}},
                                       UpdateExpression="SET valor = :v",
                                       ExpressionAttributeValues={":v": {"N": amount}})


# -- the amount people see is the amount bound ------------------------------------------


def test_an_edited_stored_amount_is_refused_at_listing_showing_and_deciding(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("valor-listar")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    _set_stored_amount(mocked_aws, ledger, approval, "15")
    listed = [row for row in _listing(ledger)["pendentes"] if row["aprovacaoId"] == approval]
    # Listed so an operator sees something is wrong, never with the edited figure.
    assert listed and all(row["valor"] != "15" and row["valor"] != "15.00" for row in listed)
    assert listed[0]["status"] == "invalida"
    assert _showing(ledger, approval) == {"ok": False, "erro": {"codigo": "aprovacao_invalida"}}
    resumed: list[str] = []
    assert _decide(ledger, approval, resumed) == {"ok": False, "erro": {"codigo": "aprovacao_invalida"}}
    assert resumed == [] and ApprovalStore(ledger).get(approval).status is ApprovalStatus.PENDING
    refused = [a for a in _audit(ledger, conv) if a["evento"] == "DECISAO_DE_APROVACAO_RECUSADA"]
    assert refused and _details(refused[-1])["motivo"] == "aprovacao_invalida"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []


def test_an_amount_edited_after_the_approval_never_runs_nor_is_told(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("valor-retomar")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval)["aprovacao"]["valor"] == "150.00"
    _set_stored_amount(mocked_aws, ledger, approval, "15")
    resumed = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert resumed.status == "aguardando_humano" and "15,00" not in (resumed.reply or "")
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.APPROVED  # never consumed
    assert not any(a["evento"] == "APROVACAO_CONSUMIDA" for a in _audit(ledger, conv))


def test_the_amount_on_every_surface_is_the_bound_one(mocked_aws, gateway, tools):
    """The untouched path: listing, decision, customer's message and audit all say the
    amount the gateway debited."""
    ledger, conv = mocked_aws["ledger"], _conv("valor-integro")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    (row,) = [r for r in _listing(ledger)["pendentes"] if r["aprovacaoId"] == approval]
    assert row["valor"] == "150.00" and row["status"] == "pendente"
    _decide(ledger, approval)
    resumed = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert resumed.reply == "Seu reembolso de R$ 150,00 do pedido 4821 foi aprovado e emitido."
    (debit,) = gateway.debits_for(conv)
    assert Decimal(str(debit["valor"])) == Decimal("150.00")
    (consumed,) = [a for a in _audit(ledger, conv) if a["evento"] == "APROVACAO_CONSUMIDA"]
    assert Decimal(_details(consumed)["valor"]) == Decimal("150")


# -- a cancellation voids the conversation's approvals ------------------------------------


def _give_back(ledger: Ledger, conv: str) -> None:
    """What ``scripts/atendente.py devolver`` writes: the conversation back to the agent."""
    from scripts.atendente import give_back

    give_back(ledger, conv)


def _hand_to_person(ledger: Ledger, conv: str) -> None:
    state = ledger.acquire_conversation(conversation_id=conv, customer_id=1001, lease_s=30)
    ledger.commit_conversation(state, messages=state.messages, status=ConversationStatus.WAITING_HUMAN)


def test_a_decision_on_a_cancelled_conversation_is_refused_and_the_cancellation_voids_it(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("cancelada")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    assert ledger.request_cancellation(conv)
    resumed: list[str] = []
    assert _decide(ledger, approval, resumed) == {"ok": False, "erro": {"codigo": "conversa_cancelada"}}
    assert resumed == [] and ApprovalStore(ledger).get(approval).status is not ApprovalStatus.APPROVED
    refused = [a for a in _audit(ledger, conv) if a["evento"] == "DECISAO_DE_APROVACAO_RECUSADA"]
    assert refused and _details(refused[-1])["motivo"] == "conversa_cancelada"
    # The customer writes: the turn consumes the cancellation, a person takes over.
    model = ScriptedModel()
    orch, _ = build(model, ledger, invoker, **POLICY)
    assert orch.handle(_turn(conv, "e aí?"), Deadline.after(60)).status == "aguardando_humano"
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.VOIDED
    assert _decide(ledger, approval)["ok"] is False
    # Back to the agent, the same call asks a person again: nothing debited.
    _give_back(ledger, conv)
    reply, _ = _ask(ledger, invoker, conv)
    assert reply.status == "aguardando_aprovacao"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []


def test_an_approval_decided_before_the_cancellation_is_voided_by_it(mocked_aws, gateway, tools):
    """Approved, then cancelled before the resume ran: the resume stops at the
    cancellation, and the old approval never authorises the same call later."""
    ledger, conv = mocked_aws["ledger"], _conv("aprovada-cancelada")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval)["ok"] is True
    assert ledger.request_cancellation(conv)
    resumed = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert resumed.status == "aguardando_humano" and gateway.debits_for(conv) == []
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.VOIDED
    _give_back(ledger, conv)
    reply, _ = _ask(ledger, invoker, conv)
    assert reply.status == "aguardando_aprovacao"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []
    assert "APROVACAO_ANULADA" in [a["evento"] for a in _audit(ledger, conv)]


def test_a_decision_on_a_conversation_handed_to_a_person_is_refused_and_changes_nothing(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("com-pessoa")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    _hand_to_person(ledger, conv)
    resumed: list[str] = []
    assert _decide(ledger, approval, resumed) == {"ok": False, "erro": {"codigo": "conversa_com_atendente"}}
    assert resumed == [] and ApprovalStore(ledger).get(approval).status is ApprovalStatus.PENDING
    assert ledger.read_conversation(conv).status is ConversationStatus.WAITING_HUMAN
    assert gateway.debits_for(conv) == []


# -- a request that expires undecided ------------------------------------------------------


def _clocked(mocked_aws) -> tuple[Ledger, list[float]]:
    clock = [1_800_000_000.0]
    return Ledger(mocked_aws["ledger"].table_name, mocked_aws["dynamodb"], clock=lambda: clock[0]), clock


def test_an_expired_request_is_closed_the_customer_told_and_the_agent_answers_again(mocked_aws, gateway, tools):
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("expira-mensagem")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    clock[0] += 601
    silent = ScriptedModel()
    orch, _ = build(silent, ledger, invoker, **POLICY)
    reply = orch.handle(_turn(conv, "e aí, saiu?"), Deadline.after(60))
    assert (reply.status, reply.motivo) == ("ativa", "aprovacao_expirada")
    assert "expirou" in reply.resposta and "Nenhum valor foi movimentado" in reply.resposta
    assert silent.requests == []  # the sentence about money is code's, not the model's
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.EXPIRED
    assert "APROVACAO_EXPIRADA" in [a["evento"] for a in _audit(ledger, conv)]
    # The conversation is the agent's again: the next message reaches the model.
    model = ScriptedModel(text_reply("Posso ajudar em algo mais?"))
    orch, _ = build(model, ledger, invoker, **POLICY)
    assert orch.handle(_turn(conv, "ok, obrigado"), Deadline.after(60)).status == "ativa"
    assert len(model.requests) == 1
    # The same call asked again is a fresh request (its own record and id), never the expired one: nothing debited.
    assert _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")[0].status == "aguardando_aprovacao"
    old, fresh = [item["aprovacaoId"] for item in ledger.history(conv, item_type=ItemType.APPROVAL)]
    assert old == approval and fresh != approval
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.EXPIRED
    assert ApprovalStore(ledger).get(fresh).status is ApprovalStatus.PENDING
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []


def test_expired_requests_are_closed_without_waiting_for_the_customer(mocked_aws, gateway, tools):
    """The decision Lambda's ``expirar`` (and a decision refused as expired) resumes the
    conversation: the record closed, the customer told, the conversation the agent's."""
    ledger, clock = _clocked(mocked_aws)
    invoker = _invoker(tools)
    convs = [_conv("expira-varredura-a"), _conv("expira-varredura-b")]
    orchs = [_ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")[1] for conv in convs]
    approvals = [_approval(ledger, conv) for conv in convs]
    clock[0] += 601
    from cadencia_shared.models import ExpireRequest

    resumed: list[str] = []
    answer = decision_entry(ExpireRequest.model_validate({"acao": "expirar"}), ledger, approvers=APPROVERS,
                            resume=resumed.append)
    assert answer["ok"] is True and set(approvals) <= set(answer["expiradas"]) and set(approvals) <= set(resumed)
    # A decision arriving late is refused, and resumes the conversation too.
    late: list[str] = []
    assert _decide(ledger, approvals[1], late) == {"ok": False, "erro": {"codigo": "aprovacao_expirada"}}
    assert late == [approvals[1]]
    for orch, conv, approval in zip(orchs, convs, approvals, strict=False):
        done = Resumer.of(orch).resume(approval, Deadline.after(60))
        assert (done.status, done.reason) == ("ativa", "aprovacao_expirada") and "expirou" in done.reply
        assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.EXPIRED
        assert ledger.read_conversation(conv).status is ConversationStatus.ACTIVE
        assert Resumer.of(orch).resume(approval, Deadline.after(60)).reason == "nada_a_retomar"
    assert [r for r in _listing(ledger)["pendentes"] if r["aprovacaoId"] in approvals] == []
    assert invoker.calls["emitir_reembolso"] == 0 and all(gateway.debits_for(c) == [] for c in convs)


# -- intactness, by property ------------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import settings as hsettings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cadencia_shared.approvals import ApprovalRecord, canonical_arguments  # noqa: E402
from cadencia_shared.ledger import approval_id  # noqa: E402


def _item(cents: int, **changes) -> dict:
    arguments = {"pedidoId": "4821", "valor": cents / 100}
    text, digest = canonical_arguments(arguments)
    item = {"aprovacaoId": approval_id("conv-p", "emitir_reembolso", "v1", digest), "ferramenta": "emitir_reembolso",
            "versaoFerramenta": "v1", "argumentos": text, "argumentosSha256": digest, "conversaId": "conv-p",
            "clienteId": Decimal(1001), "valor": Decimal(str(cents / 100)), "motivo": "acima_do_limite",
            "status": "pendente", "criadoEm": "2027-01-01T00:00:00.000Z", "expiraEmMs": Decimal(1)}
    return {**item, **changes}


@hsettings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=99_999_999), st.decimals(allow_nan=True, allow_infinity=True, places=2))
def test_a_stored_amount_that_is_not_the_argument_is_never_intact(cents, stored):
    record = ApprovalRecord.from_item(_item(cents, valor=stored))
    assert record.intact == (stored.is_finite() and stored == Decimal(str(cents / 100)))
    assert record.amount == Decimal(str(cents / 100))  # what is shown is the argument, always
    assert ApprovalRecord.from_item(_item(cents)).intact


@hsettings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=99_999_999), st.integers(min_value=1, max_value=99_999_999),
       st.sampled_from(["argumentos", "aprovacaoId", "conversaId", "versaoFerramenta"]))
def test_edited_arguments_or_binding_fields_are_never_intact(cents, other, field):
    if cents == other:
        return
    edited = _item(other)[field] if field in ("argumentos", "aprovacaoId") else f"{_item(cents)[field]}-x"
    record = ApprovalRecord.from_item(_item(cents, **{field: edited}))
    assert not record.intact and not record.binds(conversation_id="conv-p", tool="emitir_reembolso", version="v1",
                                                  arguments_sha256=record.arguments_sha256)


def test_the_operators_cancel_command_from_another_process_voids_the_waiting_approval(local_stack, erp, gateway):
    import subprocess
    from pathlib import Path

    from scripts.local_stack.aws import session_client

    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    conv, invoker = _conv("operador"), InProcessInvoker(local_stack.function_environments())
    _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    root = Path(__file__).resolve().parents[1]
    env = {"PATH": "/usr/bin:/bin", "CADENCIA_LOCAL_STACK_DIR": local_stack.directory,
           "LEDGER_TABLE": ledger.table_name}
    done = subprocess.run([str(root / "scripts" / "operador"), "cancelar", "--conversa", conv, "--local"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 aprovação(ões) anulada(s)" in done.stdout
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.VOIDED
    assert [r for r in _listing(ledger)["pendentes"] if r["aprovacaoId"] == approval] == []
    assert _decide(ledger, approval)["ok"] is False and gateway.debits_for(conv) == []

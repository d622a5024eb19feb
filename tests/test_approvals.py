"""The confirmation gate and approvals, end to end: the real SDK with a
scripted model, the real ledger (moto), the real refund Lambda handler, the real
PostgreSQL and the real gateway — every debit counted on the gateway itself.

The threshold is configured to R$ 100 here (APROVACAO_LIMITE_REAIS) so the demo
order 4821 (R$ 189,90) is above it; the default R$ 500 is checked separately."""

from __future__ import annotations

import contextlib
import json
import uuid
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore, DecisionRefused, canonical_arguments
from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import ConversationStatus, ItemType, Ledger, approval_id, approval_pk
from cadencia_shared.settings import ApprovalSettings
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.loop import ConversationBusyError
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from orchestrator.tools import canonical_input, tool_version

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

OPERATOR = "ana.operadora"
POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": f"{OPERATOR},bruno.supervisor"}
REFUND = {"pedidoId": "4821", "valor": 189.9}


def _turn(conv: str, text: str = "quero o reembolso") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _conv(label: str) -> str:
    return f"aprov-{label}-{uuid.uuid4().hex[:8]}"


def _real_tools(tools) -> CountingInvoker:
    return CountingInvoker(InProcessInvoker({name: tools.environment(spec) for name, spec in TOOLS.items()}))


def _ask(ledger: Ledger, invoker, conv: str, arguments: dict | None = None, **env: str):
    """One customer message whose model asks for a refund; returns (reply, model, orchestrator)."""
    model = ScriptedModel(tool_use("emitir_reembolso", arguments or REFUND), text_reply("(não deveria ser pedido)"))
    orch, _ = build(model, ledger, invoker, **{**POLICY, **env})
    return orch.handle(_turn(conv), Deadline.after(60)), model, orch


def _pending(ledger: Ledger, conv: str):
    (item,) = [i for i in ledger.history(conv, item_type=ItemType.APPROVAL)]
    return ApprovalStore(ledger).get(item["aprovacaoId"])


def _decide(ledger: Ledger, approval: str, *, approve: bool = True, who: str = OPERATOR, why: str = "conferido"):
    return ApprovalStore(ledger).decide(approval, approve=approve, approver=who, justification=why,
                                        allowed_approvers=ApprovalSettings.from_env(POLICY).approvers)


def _audit_events(ledger: Ledger, conv: str) -> list[str]:
    return [i["evento"] for i in ledger.history(conv, item_type=ItemType.AUDIT)]


# -- the policy -----------------------------------------------------------------------


def test_below_the_default_threshold_a_first_refund_runs_without_approval(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("abaixo")
    model = ScriptedModel(tool_use("emitir_reembolso", REFUND), text_reply("Posso ajudar em algo mais?"))
    orch, _ = build(model, ledger, _real_tools(tools), APROVADORES="")  # default R$ 500, nobody to ask
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "ativa"
    assert len(gateway.debits_for(conv)) == 1
    assert list(ledger.history(conv, item_type=ItemType.APPROVAL)) == []


def test_above_the_threshold_with_no_approver_refuses_and_never_executes(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("sem-aprovador")
    invoker = _real_tools(tools)
    reply, model, _ = _ask(ledger, invoker, conv, APROVADORES="")
    assert (reply.status, reply.motivo) == ("aguardando_humano", "aprovacao_sem_aprovador")
    assert "Nenhum valor foi movimentado" in reply.resposta
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []
    assert "APROVACAO_SEM_APROVADOR" in _audit_events(ledger, conv)
    assert list(ledger.history(conv, item_type=ItemType.APPROVAL)) == []
    assert len(model.requests) == 1  # the turn ended at the refusal


def test_above_the_threshold_the_conversation_waits_with_a_bound_durable_request(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("espera")
    invoker = _real_tools(tools)
    reply, _model, _ = _ask(ledger, invoker, conv)
    assert (reply.status, reply.motivo) == ("aguardando_aprovacao", "aguardando_aprovacao")
    assert "aprovação de uma pessoa" in reply.resposta and "ainda não movimentou nenhum valor" in reply.resposta
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []
    record = _pending(ledger, conv)
    canonical, digest = canonical_arguments({"pedidoId": "4821", "valor": 189.9})
    assert (record.status, record.tool, record.conversation_id, record.customer_id) == \
        (ApprovalStatus.PENDING, "emitir_reembolso", conv, 1001)
    assert record.arguments_sha256 == digest and json.dumps(record.arguments, sort_keys=True,
                                                             separators=(",", ":")) == canonical
    assert record.tool_version == tool_version("emitir_reembolso", "local")
    assert record.amount == Decimal("189.9") and record.reason == "acima_do_limite"
    assert record.expires_at_ms - ledger.now_ms() > 23 * 3600 * 1000
    assert "APROVACAO_SOLICITADA" in _audit_events(ledger, conv)
    assert ledger.read_conversation(conv).status is ConversationStatus.WAITING_APPROVAL
    # The model was told the call awaits approval (so it does not insist).
    (result,) = [b for m in ledger.read_conversation(conv).messages if m["role"] == "user"
                 for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert result["is_error"] and json.loads(result["content"])["erro"] == "aguardando_aprovacao"
    # The customer writes again: no model call while waiting.
    again = ScriptedModel()
    orch, _ = build(again, ledger, invoker, **POLICY)
    reply = orch.handle(_turn(conv, "e aí?"), Deadline.after(60))
    assert (reply.status, again.requests) == ("aguardando_aprovacao", [])


def test_a_second_refund_on_a_partly_refunded_order_needs_approval_below_the_threshold(mocked_aws, gateway, tools,
                                                                                        erp):
    ledger, conv = mocked_aws["ledger"], _conv("segundo")
    erp.execute("UPDATE pedidos SET valor_reembolsado = 20, status_reembolso = 'reembolsado_parcial' WHERE id = '4821'")
    invoker = _real_tools(tools)
    reply, _, _ = _ask(ledger, invoker, conv, {"pedidoId": "4821", "valor": 10.0}, APROVACAO_LIMITE_REAIS="500")
    assert reply.status == "aguardando_aprovacao"
    assert _pending(ledger, conv).reason == "segundo_reembolso"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []


def test_when_prior_refunds_cannot_be_read_the_gate_assumes_one(mocked_aws):
    ledger, conv = mocked_aws["ledger"], _conv("desconhecido")
    invoker = CountingInvoker(answer={"ok": False, "erro": {"codigo": "erro_interno", "mensagem": "x"}})
    reply, _, _ = _ask(ledger, invoker, conv, {"pedidoId": "4821", "valor": 10.0}, APROVACAO_LIMITE_REAIS="500")
    assert reply.status == "aguardando_aprovacao"
    assert _pending(ledger, conv).reason == "reembolsos_anteriores_desconhecidos"
    assert invoker.calls["emitir_reembolso"] == 0


# -- decisions and execution ------------------------------------------------------------


def _resumer(orch) -> Resumer:
    return Resumer.of(orch)


def test_an_approval_executes_exactly_the_approved_call_once(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("aprovada")
    invoker = _real_tools(tools)
    _, _, orch = _ask(ledger, invoker, conv)
    record = _pending(ledger, conv)
    decided = _decide(ledger, record.id)
    assert (decided.status, decided.decided_by, decided.justification) == (ApprovalStatus.APPROVED, OPERATOR,
                                                                            "conferido")
    resumed = _resumer(orch).resume(record.id, Deadline.after(60))
    assert (resumed.status, resumed.reason) == ("ativa", "aprovada_executada")
    assert resumed.reply == "Seu reembolso de R$ 189,90 do pedido 4821 foi aprovado e emitido."
    (debit,) = gateway.debits_for(conv)
    assert Decimal(str(debit["valor"])) == Decimal("189.90")
    assert invoker.events[-1] == ("emitir_reembolso", {"pedidoId": "4821", "valor": 189.9, "conversaId": conv,
                                                       "clienteId": 1001})
    assert ApprovalStore(ledger).get(record.id).status is ApprovalStatus.CONSUMED
    # The history shows the executed call with the record's arguments and its result.
    state = ledger.read_conversation(conv)
    assert state.status is ConversationStatus.ACTIVE
    assert state.messages[-2]["content"][0]["input"] == record.arguments
    assert json.loads(state.messages[-1]["content"][0]["content"])["resultado"] == "executado"
    # Replayed: nothing to resume, nothing decided twice, still one debit.
    assert _resumer(orch).resume(record.id, Deadline.after(60)).reason == "nada_a_retomar"
    with pytest.raises(DecisionRefused) as err:
        _decide(ledger, record.id)
    assert err.value.reason == "aprovacao_ja_decidida"
    assert len(gateway.debits_for(conv)) == 1
    events = _audit_events(ledger, conv)
    assert "APROVACAO_CONSUMIDA" in events and "CONVERSA_RETOMADA_APOS_APROVACAO" in events


def test_a_denial_tells_the_model_is_error_with_the_reason_and_the_customer(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("negada")
    invoker = _real_tools(tools)
    _, _, orch = _ask(ledger, invoker, conv)
    record = _pending(ledger, conv)
    _decide(ledger, record.id, approve=False, why="pedido fora da política de devolução")
    resumed = _resumer(orch).resume(record.id, Deadline.after(60))
    assert (resumed.status, resumed.reason) == ("ativa", "aprovacao_negada")
    assert "não foi aprovado" in resumed.reply and "Nenhum valor foi movimentado" in resumed.reply
    last = ledger.read_conversation(conv).messages[-1]["content"][0]
    assert last["is_error"] is True
    assert json.loads(last["content"])["motivo"] == "pedido fora da política de devolução"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []
    # The model asks the same refund again later: denied, never executed.
    model = ScriptedModel(tool_use("emitir_reembolso", REFUND), text_reply("(não deveria ser pedido)"))
    orch2, _ = build(model, ledger, invoker, **POLICY)
    reply = orch2.handle(_turn(conv, "tenta de novo"), Deadline.after(60))
    assert reply.motivo == "aprovacao_negada" and gateway.debits_for(conv) == []


def test_an_approval_for_another_amount_conversation_or_version_authorises_nothing(mocked_aws, gateway, tools):
    ledger = mocked_aws["ledger"]
    invoker = _real_tools(tools)
    conv_a = _conv("a")
    _ask(ledger, invoker, conv_a, {"pedidoId": "4821", "valor": 150.0})
    _decide(ledger, _pending(ledger, conv_a).id)  # approved: R$ 150 in conversation A, release "local"
    # R$ 189,90 in A: not the approved amount → a new request, nothing runs.
    model = ScriptedModel(tool_use("emitir_reembolso", REFUND), text_reply("x"))
    orch, _ = build(model, ledger, invoker, **POLICY)
    state = ledger.read_conversation(conv_a)
    ledger.commit_conversation(ledger.acquire_conversation(conversation_id=conv_a, customer_id=1001, lease_s=30),
                               messages=state.messages, status=ConversationStatus.ACTIVE)
    assert orch.handle(_turn(conv_a), Deadline.after(60)).status == "aguardando_aprovacao"
    # R$ 150 in conversation B: A's approval is not B's.
    conv_b = _conv("b")
    assert _ask(ledger, invoker, conv_b, {"pedidoId": "4821", "valor": 150.0})[0].status == "aguardando_aprovacao"
    # R$ 150 in A again, after a new release: the approved record is for the old version.
    conv_a_state = ledger.read_conversation(conv_a)
    ledger.commit_conversation(ledger.acquire_conversation(conversation_id=conv_a, customer_id=1001, lease_s=30),
                               messages=conv_a_state.messages, status=ConversationStatus.ACTIVE)
    reply = _ask(ledger, invoker, conv_a, {"pedidoId": "4821", "valor": 150.0}, VERSAO_RELEASE="v2")[0]
    assert reply.status == "aguardando_aprovacao"
    assert invoker.calls["emitir_reembolso"] == 0
    assert gateway.debits_for(conv_a) == [] and gateway.debits_for(conv_b) == []
    records = list(ledger.history(conv_a, item_type=ItemType.APPROVAL))
    assert {r["status"] for r in records} == {"aprovada", "pendente"} and len(records) == 3


def test_an_altered_record_never_runs(mocked_aws, gateway, tools):
    """Someone with table access edits an approved record's amount: the stored
    arguments no longer hash to the bound digest, and the gate refuses."""
    ledger, conv = mocked_aws["ledger"], _conv("alterada")
    invoker = _real_tools(tools)
    _, _, orch = _ask(ledger, invoker, conv, {"pedidoId": "4821", "valor": 150.0})
    record = _pending(ledger, conv)
    _decide(ledger, record.id)
    mocked_aws["dynamodb"].update_item(
        TableName=ledger.table_name, Key={"pk": {"S": approval_pk(record.id)}},
        UpdateExpression="SET argumentos = :a", ExpressionAttributeValues={
            ":a": {"S": json.dumps({"pedidoId": "4821", "valor": 189.9}, separators=(",", ":"))}})
    resumed = _resumer(orch).resume(record.id, Deadline.after(60))
    assert resumed.status == "aguardando_humano"
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []
    assert "APROVACAO_INVALIDA" in _audit_events(ledger, conv)


def test_decisions_refused_unknown_approver_expired_and_unknown_id(mocked_aws, tools):
    clock = [1_800_000_000.0]
    ledger = Ledger(mocked_aws["ledger"].table_name, mocked_aws["dynamodb"], clock=lambda: clock[0])
    conv = _conv("expira")
    _ask(ledger, _real_tools(tools), conv, APROVACAO_VALIDADE_S="600")
    record = _pending(ledger, conv)
    with pytest.raises(DecisionRefused) as err:
        _decide(ledger, record.id, who="mallory")
    assert err.value.reason == "aprovador_nao_autorizado"
    with pytest.raises(DecisionRefused) as err:
        _decide(ledger, "0" * 32)
    assert err.value.reason == "aprovacao_inexistente"
    clock[0] += 601
    with pytest.raises(DecisionRefused) as err:
        _decide(ledger, record.id)
    assert err.value.reason == "aprovacao_expirada"
    assert ApprovalStore(ledger).get(record.id).status is ApprovalStatus.PENDING


def test_an_approved_call_is_not_run_after_its_expiry(mocked_aws, gateway, tools):
    clock = [1_800_000_000.0]
    ledger = Ledger(mocked_aws["ledger"].table_name, mocked_aws["dynamodb"], clock=lambda: clock[0])
    conv = _conv("aprovada-expirada")
    invoker = _real_tools(tools)
    _, _, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    record = _pending(ledger, conv)
    _decide(ledger, record.id)
    clock[0] += 601
    resumed = _resumer(orch).resume(record.id, Deadline.after(60))
    # Closed, never run; the customer is told a person approved it but it was not run in time.
    assert (resumed.status, resumed.reason) == ("ativa", "aprovada_expirada") and "foi aprovado" in resumed.reply
    assert ApprovalStore(ledger).get(record.id).status is ApprovalStatus.EXPIRED
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits_for(conv) == []


def test_an_approval_while_the_conversation_is_busy_waits_and_then_runs_once(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("ocupada")
    invoker = _real_tools(tools)
    _, _, orch = _ask(ledger, invoker, conv)
    record = _pending(ledger, conv)
    _decide(ledger, record.id)
    busy = ledger.acquire_conversation(conversation_id=conv, customer_id=1001, lease_s=60)  # a turn in progress
    with pytest.raises(ConversationBusyError):
        _resumer(orch).resume(record.id, Deadline.after(60))
    assert gateway.debits_for(conv) == [] and ApprovalStore(ledger).get(record.id).status is ApprovalStatus.APPROVED
    ledger.release_conversation(busy)
    assert _resumer(orch).resume(record.id, Deadline.after(60)).reason == "aprovada_executada"
    assert len(gateway.debits_for(conv)) == 1


# -- binding, by property ------------------------------------------------------------

CENTS = st.integers(min_value=1, max_value=99_999_999)


def _bound_id(conv: str, cents: int, as_float: bool = True) -> str:
    value = cents / 100 if as_float else cents // 100
    args = canonical_input("emitir_reembolso", {"pedidoId": "4821", "valor": value})
    return approval_id(conv, "emitir_reembolso", tool_version("emitir_reembolso", "local"),
                       canonical_arguments(args)[1])


@hsettings(max_examples=300, deadline=None)
@given(CENTS, CENTS)
def test_two_amounts_never_share_an_approval(a, b):
    assert (_bound_id("conv-a", a) == _bound_id("conv-a", b)) == (a == b)


@hsettings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=999_999))
def test_one_amount_in_any_json_spelling_is_one_approval_and_never_another_conversations(reais):
    assert _bound_id("conv-a", reais * 100) == _bound_id("conv-a", reais * 100, as_float=False)
    assert _bound_id("conv-a", reais * 100) != _bound_id("conv-b", reais * 100)


def test_a_new_release_or_schema_is_a_new_version():
    assert tool_version("emitir_reembolso", "local") != tool_version("emitir_reembolso", "v2")
    assert tool_version("emitir_reembolso", "local") != tool_version("consultar_status_pedido", "local")


class _BothReadFirst:
    """Tool calls one at a time (the in-process invoker swaps os.environ), but a status
    read waits until the other conversation has read too: both see "nothing refunded"
    before either refund runs — the race, made certain. Without the ledger's mark the
    order would be refunded twice without anyone asked."""

    def __init__(self, inner) -> None:
        import threading

        self.inner, self.lock, self.barrier = inner, threading.Lock(), threading.Barrier(2, timeout=5)

    def invoke(self, tool, event):
        import threading

        with self.lock:
            answer = self.inner.invoke(tool, event)
        if tool.name == "consultar_status_pedido":
            # Broken: the other conversation never read the ERP (the mark stopped it first).
            with contextlib.suppress(threading.BrokenBarrierError):
                self.barrier.wait()
        return answer


def test_two_conversations_racing_first_refunds_on_one_order_make_one_a_second_refund(mocked_aws, gateway, tools):
    """Threshold R$ 500: the amount alone needs no approval; being second does."""
    import threading

    ledger = mocked_aws["ledger"]
    convs = [_conv("corrida-a"), _conv("corrida-b")]
    invoker = _BothReadFirst(_real_tools(tools))
    replies: dict[str, str] = {}

    def ask(conv: str) -> None:
        model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 50.0}), text_reply("ok"))
        orch, _ = build(model, ledger, invoker, **{**POLICY, "APROVACAO_LIMITE_REAIS": "500"})
        replies[conv] = orch.handle(_turn(conv), Deadline.after(60)).status

    threads = [threading.Thread(target=ask, args=(c,)) for c in convs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(replies.values()) == ["aguardando_aprovacao", "ativa"]
    waiting = next(c for c in convs if replies[c] == "aguardando_aprovacao")
    assert _pending(ledger, waiting).reason == "segundo_reembolso"
    assert sum(len(gateway.debits_for(c)) for c in convs) == 1

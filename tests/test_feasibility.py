"""Feasibility (DESIGN's control chain: after the retry ceiling, before the
confirmation gate): a call the tool itself would refuse — not this customer's order,
an amount above the order's balance, malformed arguments — is refused before any
person is asked to approve it, and another customer's order gets exactly the answer
a nonexistent order gets (no oracle). End to end: the real SDK with a scripted model,
the real ledger (moto), the real status and refund Lambda handlers, the real
PostgreSQL and the real gateway — every debit counted on the gateway itself."""

from __future__ import annotations

import json
import uuid

from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import ItemType, Ledger
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

POLICY = {"APROVADORES": "ana.operadora"}  # threshold: the default R$ 500


def _conv(label: str) -> str:
    return f"viav-{label}-{uuid.uuid4().hex[:8]}"


def _invoker(tools) -> CountingInvoker:
    return CountingInvoker(InProcessInvoker({name: tools.environment(spec) for name, spec in TOOLS.items()}))


def _ask(ledger: Ledger, invoker, conv: str, arguments: dict, customer: int = 1001, **env: str):
    model = ScriptedModel(tool_use("emitir_reembolso", arguments), text_reply("Certo."))
    orch, _ = build(model, ledger, invoker, **{**POLICY, **env})
    return orch.handle(TurnRequest(conversaId=conv, clienteId=customer, mensagemId=f"wamid.{uuid.uuid4().hex}",
                                   mensagem="quero o reembolso"), Deadline.after(60))


def _result(ledger: Ledger, conv: str) -> dict:
    """The one tool_result the model read for the refund call."""
    messages = ledger.read_conversation(conv).messages
    (call,) = [b["id"] for m in messages if m["role"] == "assistant" for b in m["content"]
               if isinstance(b, dict) and b.get("name") == "emitir_reembolso"]
    (block,) = [b for m in messages if m["role"] == "user" for b in m["content"]
                if isinstance(b, dict) and b.get("tool_use_id") == call]
    return block


def _approvals(ledger: Ledger, conv: str) -> list:
    return list(ledger.history(conv, item_type=ItemType.APPROVAL))


def test_another_customers_refunded_order_is_refused_like_a_nonexistent_one_and_nobody_is_asked(
        mocked_aws, gateway, tools, erp):
    ledger = mocked_aws["ledger"]
    erp.execute("UPDATE pedidos SET valor_reembolsado = 320, status_reembolso = 'reembolsado' WHERE id = '5100'")
    invoker = _invoker(tools)
    foreign, missing = _conv("alheio"), _conv("inexistente")
    replies = {conv: _ask(ledger, invoker, conv, {"pedidoId": order, "valor": 100.0})
               for conv, order in ((foreign, "5100"), (missing, "9999"))}
    for conv, order in ((foreign, "5100"), (missing, "9999")):
        assert (replies[conv].status, replies[conv].motivo) == ("ativa", "resposta"), replies[conv]
        assert _approvals(ledger, conv) == []
        assert "APROVACAO_SOLICITADA" not in [i["evento"] for i in ledger.history(conv, item_type=ItemType.AUDIT)]
        body = json.loads(_result(ledger, conv)["content"])
        assert order in json.dumps(body, ensure_ascii=False)
    # The model (and so the customer) reads the same thing for both, the order id aside.
    shown = [json.dumps({k: v for k, v in _result(ledger, c).items() if k != "tool_use_id"}, ensure_ascii=False,
                        sort_keys=True).replace(o, "<pedido>") for c, o in ((foreign, "5100"), (missing, "9999"))]
    assert shown[0] == shown[1]
    assert "pedido_nao_encontrado" in shown[0] and '"is_error": true' in shown[0]
    # ... and their audit links say the same (a person reading the chain learns nothing either).
    links = [[{k: v for k, v in json.loads(i["detalhes"]).items() if k not in ("pedidoId", "assunto", "mensagemId")}
              for i in ledger.history(c, item_type=ItemType.AUDIT) if i["evento"] == "CHAMADA_INVIAVEL"]
             for c in (foreign, missing)]
    assert links[0] == links[1] and len(links[0]) == 1
    assert invoker.calls["emitir_reembolso"] == 0
    assert gateway.debits() == []


def test_an_attempt_on_another_customers_order_leaves_its_owner_a_first_refund(mocked_aws, gateway, tools):
    """The attacker's refused call must not take the order's first-refunder mark: the
    owner's own first refund would then need a person (a denial of service)."""
    ledger = mocked_aws["ledger"]
    _ask(ledger, _invoker(tools), _conv("ataque"), {"pedidoId": "5100", "valor": 50.0})
    owner = _conv("dono")
    reply = _ask(ledger, _invoker(tools), owner, {"pedidoId": "5100", "valor": 50.0}, customer=1002)
    assert reply.status == "ativa" and _approvals(ledger, owner) == []
    assert len(gateway.debits_for(owner)) == 1


def test_an_amount_above_the_orders_balance_is_refused_before_anyone_is_asked(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("acima")
    invoker = _invoker(tools)
    reply = _ask(ledger, invoker, conv, {"pedidoId": "4822", "valor": 800.0})  # order 4822: R$ 59,00
    assert (reply.status, reply.motivo) == ("ativa", "resposta"), reply
    assert _approvals(ledger, conv) == []
    result = _result(ledger, conv)
    assert result["is_error"] is True and "valor_excede_saldo" in result["content"]
    assert invoker.calls["emitir_reembolso"] == 0 and gateway.debits() == []


def test_a_malformed_refund_is_refused_before_anyone_is_asked(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("malformado")
    invoker = _invoker(tools)
    reply = _ask(ledger, invoker, conv, {"pedidoId": "4821", "valor": "800"})  # a string, not a number
    assert reply.status == "ativa" and _approvals(ledger, conv) == []
    assert "entrada_invalida" in _result(ledger, conv)["content"]
    assert sum(invoker.calls.values()) == 0 and gateway.debits() == []


# -- hostile status answers, by property (unit: no stack) ---------------------------

from hypothesis import given  # noqa: E402
from hypothesis import settings as hsettings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cadencia_shared.catalog import EMITIR_REEMBOLSO  # noqa: E402
from orchestrator.controls import CallContext  # noqa: E402
from orchestrator.feasibility import OrderRead, order_read  # noqa: E402
from orchestrator.invokers import Invocation, InvocationStatus  # noqa: E402
from orchestrator.tools import ToolCall  # noqa: E402

JUNK = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner,
                                                                                 max_size=3), max_leaves=8)
FIGURE = st.one_of(JUNK, st.sampled_from(["NaN", "sNaN", "Infinity", "-1", "1e999999", "", "10,00"]))


class _Canned:
    def __init__(self, payload) -> None:
        self.payload = payload

    def invoke(self, tool, event):
        return Invocation(InvocationStatus.OK, payload=self.payload)


def _ctx() -> CallContext:
    call = ToolCall(spec=EMITIR_REEMBOLSO, tool_use_id="toolu_x", arguments={"pedidoId": "4821", "valor": 10.0},
                    conversation_id="conv-x", customer_id=1001)
    return CallContext(call, Deadline.after(60))


@hsettings(max_examples=300, deadline=None)
@given(st.one_of(JUNK, st.fixed_dictionaries({"ok": st.just(True), "dados": st.fixed_dictionaries(
    {"valorPedido": FIGURE, "valorReembolsado": FIGURE})}), st.fixed_dictionaries(
    {"ok": st.just(False), "erro": st.one_of(JUNK, st.fixed_dictionaries({"codigo": JUNK}))})))
def test_a_status_answer_that_is_not_the_order_is_never_a_refusal_nor_a_crash(payload):
    """Only the status tool's exact "not found" refuses; figures are used only when both
    are finite, non-negative numbers; anything else is "not read" (the tool decides)."""
    read = order_read(_ctx(), _Canned(payload), reserve_s=3.0)
    if read is None:
        return
    if not read.found:
        assert payload["ok"] is False and payload["erro"]["codigo"] == "pedido_nao_encontrado"
    else:
        assert read.order_amount.is_finite() and read.refunded.is_finite()
        assert read.order_amount >= 0 and read.refunded >= 0
        assert isinstance(read, OrderRead)

"""The control chain around every tool call: order, refusals, after-steps, and
adding a control as one component (the how-to in docs/controls.md).

The chain-level tests drive ``ToolRound`` directly (no local stack: a recording
invoker answers); the end-to-end ones go through the real SDK and the ledger."""

from __future__ import annotations

import json
import uuid
from enum import StrEnum
from types import SimpleNamespace

from cadencia_shared.ledger import ConversationStatus, ItemType
from cadencia_shared.outcomes import Outcome
from orchestrator import texts
from orchestrator.controls import CallContext, CallOutcome, Refusal, default_controls
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from orchestrator.steps import HandOff, Reply
from orchestrator.tool_round import ToolRound

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import CountingInvoker, build


class Why(StrEnum):
    CLOSED = "fechado_para_teste"


class Recorder:
    """A control that lets everything through and writes down what it saw."""

    def __init__(self, name: str, log: list[tuple]) -> None:
        self.name, self.log = name, log

    def before(self, ctx: CallContext) -> Refusal | None:
        self.log.append((self.name, "before", ctx.call.spec.name))
        return None

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        answered = outcome.invocation.payload["resultado"] if outcome.invocation else None
        self.log.append((self.name, "after", ctx.call.spec.name, answered, outcome.refused_by))


class Closed:
    """Refuses one tool, ending the turn with ``ending``."""

    def __init__(self, tool: str, ending) -> None:
        self.tool, self.ending = tool, ending

    def before(self, ctx: CallContext) -> Refusal | None:
        if ctx.call.spec.name != self.tool:
            return None
        return Refusal(Why.CLOSED, {"mensagem": "fechado"}, ending=self.ending)

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        assert ctx.call.spec.name != self.tool, "a control that refused never sees the outcome"


def _request(conv: str = "conv-chain") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="oi")


def _block(name: str, tool_input: dict, n: int) -> SimpleNamespace:
    return SimpleNamespace(type="tool_use", id=f"toolu_{n:04d}", name=name, input=tool_input)


STATUS = ("consultar_status_pedido", {"pedidoId": "4821"})
REFUND = ("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0})


def test_before_steps_in_order_after_steps_in_reverse_seeing_the_answer():
    log: list[tuple] = []
    invoker = CountingInvoker()
    round_ = ToolRound(invoker, [Recorder("first", log), Recorder("second", log)])
    done = round_.run(_request(), [_block(*STATUS, 1)], Deadline.after(60), set())
    assert log == [("first", "before", "consultar_status_pedido"), ("second", "before", "consultar_status_pedido"),
                   ("second", "after", "consultar_status_pedido", "consultado", None),
                   ("first", "after", "consultar_status_pedido", "consultado", None)]
    assert done.ending is None and [r["is_error"] for r in done.results] == [False]


def test_a_refusal_stops_the_chain_never_invokes_and_unwinds_the_controls_before_it():
    log: list[tuple] = []
    invoker = CountingInvoker()
    ending = HandOff("um humano assume", "fechado")
    round_ = ToolRound(invoker, [Recorder("first", log), Closed("emitir_reembolso", ending), Recorder("never", log)])
    done = round_.run(_request(), [_block(*REFUND, 1)], Deadline.after(60), set())
    assert invoker.calls["emitir_reembolso"] == 0
    assert log == [("first", "before", "emitir_reembolso"), ("first", "after", "emitir_reembolso", None, Why.CLOSED)]
    (result,) = done.results
    assert result["is_error"] is True
    assert json.loads(result["content"]) == {"erro": "fechado_para_teste", "mensagem": "fechado"}
    assert done.ending == ending


def test_every_block_is_answered_and_a_handoff_wins_over_a_reply_ending():
    invoker = CountingInvoker()
    reply, handoff = Reply("responde", "r"), HandOff("humano", "h")
    round_ = ToolRound(invoker, [Closed("consultar_status_pedido", reply), Closed("emitir_reembolso", handoff)])
    profile = ("atualizar_cadastro", {"campos": {"email": "a@example.com"}})
    blocks = [_block(*STATUS, 1), _block(*REFUND, 2), _block(*profile, 3)]
    done = round_.run(_request(), blocks, Deadline.after(60), set())
    assert [r["tool_use_id"] for r in done.results] == ["toolu_0001", "toolu_0002", "toolu_0003"]
    assert [r["is_error"] for r in done.results] == [True, True, False]
    assert invoker.calls == {"atualizar_cadastro": 1}
    assert done.endings == [reply, handoff] and done.ending == handoff


def test_a_control_added_to_the_default_chain_hands_off_through_the_real_loop(mocked_aws):
    """The how-to's example: one class, one line in the list. The ceiling before it
    counted the attempt (left ``pendente``: the call was never invoked)."""
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_use(*REFUND), text_reply("não deveria ser pedido"))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker, controls=lambda cfg: [
        *default_controls(ledger, ceiling=cfg.ceiling, reserve_s=cfg.reserve_s, invoker=invoker,
                          approval=cfg.approval),
        Closed("emitir_reembolso", HandOff("Um atendente humano vai cuidar do seu reembolso.", "fechado")),
    ])
    reply = orch.handle(_request("conv-closed"), Deadline.after(60))
    assert invoker.calls["emitir_reembolso"] == 0 and len(model.requests) == 1
    assert (reply.status, reply.motivo) == ("aguardando_humano", "fechado")
    assert reply.resposta == "Um atendente humano vai cuidar do seu reembolso."
    state = ledger.read_conversation("conv-closed")
    assert state.status is ConversationStatus.WAITING_HUMAN
    assert json.loads(state.messages[-1]["content"][0]["content"])["erro"] == "fechado_para_teste"
    (attempt,) = ledger.attempts("conv-closed")
    assert attempt["resultado"] == Outcome.PENDING
    audit = ledger.history("conv-closed", item_type=ItemType.AUDIT)
    handoffs = [json.loads(a["detalhes"])["motivo"] for a in audit if a["evento"] == "ENCAMINHADO_PARA_HUMANO"]
    assert handoffs == ["fechado"]


def test_the_call_time_budget_is_each_tools_own_timeout(mocked_aws):
    """7.5 s left after the 3 s reserve: enough for the status tool (5 s), not for
    the refund (8 s). The refund is never invoked nor counted; the turn ends with
    the out-of-time reply and the conversation stays with the agent."""
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_uses(STATUS, REFUND))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_request("conv-time"), Deadline.after(10.5))
    assert dict(invoker.calls) == {"consultar_status_pedido": 1}
    assert (reply.status, reply.motivo, reply.resposta) == ("ativa", "sem_tempo", texts.OUT_OF_TIME)
    results = ledger.read_conversation("conv-time").messages[-1]["content"]
    assert [(r["is_error"], json.loads(r["content"]).get("erro")) for r in results] == [(False, None),
                                                                                        (True, "sem_tempo")]
    attempts = list(ledger.attempts("conv-time"))
    assert [a["ferramenta"] for a in attempts] == ["consultar_status_pedido"]

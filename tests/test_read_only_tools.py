"""A read-only tool (``ToolSpec.read_only``) changes nothing anywhere, so an
operator's cancellation does not check before it (one read per call saved): the
turn still ends as cancelled at its commit, and every call that changes something
is still refused first."""
from __future__ import annotations

import dataclasses

import pytest

from cadencia_shared import catalog
from cadencia_shared.ledger import ConversationStatus
from infra.contract import TOOL_ROLES
from orchestrator import texts
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build
from .test_orchestrator_budgets import _existing_conversation, _request

READ_ONLY = [spec for spec in catalog.TOOLS.values() if spec.read_only]


def test_the_status_query_is_the_read_only_tool_and_its_db_user_may_only_select():
    assert [spec.name for spec in READ_ONLY] == ["consultar_status_pedido"]
    roles = {role.tool: role for role in TOOL_ROLES}
    for spec in READ_ONLY:
        role = roles[spec.name]  # the hand-written contract row, not the registry
        assert role.db_privileges and all(p.startswith("SELECT ") for p in role.db_privileges), role.db_privileges
        assert role.grants == (), role.grants  # no AWS action beyond logging in (and its logs)


@pytest.mark.parametrize("widening", [{"ledger_actions": ("dynamodb:GetItem",)}, {"appends_audit": True},
                                      {"secrets": ("x",)}, {"irreversible": True}])
def test_a_read_only_row_that_could_change_something_is_refused(widening):
    base = catalog.TOOLS["consultar_status_pedido"]
    with pytest.raises(ValueError, match="read-only"):
        dataclasses.replace(base, egress=catalog.Egress.INTERNET, **widening)


class CountingLedgerReads:
    """The ledger, counting the cancellation reads the controls make."""

    def __init__(self, ledger) -> None:
        self._ledger, self.cancellation_reads = ledger, 0

    def cancellation_pending(self, conversation_id: str) -> bool:
        self.cancellation_reads += 1
        return self._ledger.cancellation_pending(conversation_id)

    def __getattr__(self, name):
        return getattr(self._ledger, name)


def test_a_read_only_call_is_not_checked_and_the_refund_after_it_is_refused(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    conv = "conv-cancel-read-only"
    _existing_conversation(ledger, conv)
    counting = CountingLedgerReads(ledger)
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}),
                          tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0}), text_reply("nunca"))
    invoker = CountingInvoker()
    orch, _ = build(model, counting, invoker)
    assert ledger.request_cancellation(conv) is True
    reply = orch.handle(_request(conv, "cadê e reembolsa"), Deadline.after(60))
    # The status query ran without a cancellation read; the refund was read for and refused.
    assert dict(invoker.calls) == {"consultar_status_pedido": 1}
    assert counting.cancellation_reads == 1
    assert (reply.status, reply.motivo, reply.resposta) == ("aguardando_humano", "cancelada", texts.CANCELLED)
    state = ledger.read_conversation(conv)
    assert state.status is ConversationStatus.WAITING_HUMAN and not ledger.cancellation_pending(conv)


def test_a_cancellation_during_a_turn_of_read_only_calls_still_ends_it_cancelled(mocked_aws, capsys):
    """No check before the read: the commit's own condition catches the command."""
    ledger = mocked_aws["ledger"]
    conv = "conv-cancel-only-reads"
    _existing_conversation(ledger, conv)
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Consultei aqui."))

    class CancelMidCall(CountingInvoker):
        def invoke(self, tool, event):
            ledger.request_cancellation(conv)
            return super().invoke(tool, event)

    invoker = CancelMidCall()
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_request(conv, "cadê"), Deadline.after(60))
    assert invoker.calls["consultar_status_pedido"] == 1
    assert (reply.status, reply.motivo, reply.resposta) == ("aguardando_humano", "cancelada", texts.CANCELLED)
    assert not ledger.cancellation_pending(conv)

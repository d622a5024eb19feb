"""A turn's commit that DynamoDB applied but whose answer never came back.

Found investigating the four-process wamid race that once saw ``turnos == 2`` under
heavy load (tests/test_whatsapp_channel.py). The clients' read timeout is 5 s
(cadencia_shared.aws); under load the local moto server answered the commit (then a
TransactWriteItems, now one UpdateItem) after that, botocore retried it, and the
retry — applied already — failed its conditions. Either way the turn saw an error
after its commit happened, and the failure path released the message as FAILED (then a
``mensagem#`` item): the ledger turned "answered" back into "failed", a redelivery ran
the whole turn again (a second model call, the customer's
text and the answer twice in the history, the tools possibly again).

The rule tested here: once a message is answered (committed), no failure path can make
it runnable again; the redelivery gets the stored reply (``duplicada``)."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ReadTimeoutError

from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.inbound import ANSWERED_ATTRIBUTE, PROCESSING_ATTRIBUTE, message_key
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, text_reply
from .support.orchestrators import CountingInvoker, build

pytestmark = pytest.mark.stack


class AnswerLost:
    """A DynamoDB client whose next conversation commit (the UpdateItem that marks the
    message answered) reaches the table, and whose answer is then lost on the way back
    (as a read timeout after the request left)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.armed = True

    def update_item(self, **kwargs):
        result = self.inner.update_item(**kwargs)
        if self.armed and f"{ANSWERED_ATTRIBUTE} = " in kwargs["UpdateExpression"]:
            self.armed = False
            raise ReadTimeoutError(endpoint_url="http://dynamodb.local")
        return result

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_committed_turn_whose_answer_was_lost_is_never_run_again(local_stack):
    raw = session_client("dynamodb", local_stack.aws_endpoint)
    ledger = Ledger(local_stack.ledger_table, AnswerLost(raw))
    conv, wamid = f"wa-1001-perdida{uuid.uuid4().hex[:8]}", f"wamid.{uuid.uuid4().hex}"
    request = TurnRequest(conversaId=conv, clienteId=1001, mensagemId=wamid, mensagem="oi")
    model = ScriptedModel(text_reply("Olá! Primeira resposta."), text_reply("Olá! Segunda resposta."))
    orch, _ = build(model, ledger, CountingInvoker())

    with pytest.raises(ReadTimeoutError):
        orch.handle(request, Deadline.after(60))  # the commit went through; its answer did not come back

    clean = Ledger(local_stack.ledger_table, raw)
    item = clean.table.get(f"conversa#{conv}")
    # Answered, and the failure path's release (fenced on the lease) left it answered.
    assert message_key(wamid) in item[ANSWERED_ATTRIBUTE] and PROCESSING_ATTRIBUTE not in item
    assert "dono" not in item and "leaseAteMs" not in item
    again = orch.handle(request, Deadline.after(60))  # the redelivery
    assert again.duplicada and again.resposta == "Olá! Primeira resposta."
    assert len(model.requests) == 1
    state = clean.read_conversation(conv)
    assert state.turns == 1
    # One exchange: the message, the model's final answer (the output contract's
    # responder_cliente call) and that call's result — nothing from a second run.
    assert [m["role"] for m in state.messages] == ["user", "assistant", "user"]
    assert [b.get("name") for b in state.messages[1]["content"] if b.get("type") == "tool_use"] == ["responder_cliente"]

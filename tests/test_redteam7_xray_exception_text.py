"""``TRACE_MODE=xray``: an exception that crosses a span must not put its text in the
trace. X-Ray's subsegment records ``str(exception)`` as the cause's message; a busy
conversation's error carries the conversation id (``wa-{clienteId}-{day}``), which the
spans otherwise name only by a SHA-256 prefix. The type is what is recorded (as the JSONL
exporter does). Real X-Ray SDK recorder, its emitter captured: no daemon needed."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import pytest
from aws_xray_sdk.core.context import Context
from aws_xray_sdk.core.recorder import AWSXRayRecorder

from orchestrator.events import TurnRequest
from orchestrator.loop import ConversationBusyError
from orchestrator.model import Deadline
from orchestrator.tracing import XRayTracer

from .support.anthropic_fake import ScriptedModel, text_reply
from .support.orchestrators import CountingInvoker, build


class CapturingEmitter:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_entity(self, entity) -> None:
        self.sent.append(entity.serialize())

    def set_daemon_address(self, address) -> None:
        return None


def _xray_tracer() -> tuple[XRayTracer, AWSXRayRecorder, CapturingEmitter]:
    recorder, emitter = AWSXRayRecorder(), CapturingEmitter()
    recorder.configure(emitter=emitter, context=Context(), sampling=False, context_missing="LOG_ERROR")
    tracer = XRayTracer.__new__(XRayTracer)  # Powertools' Tracer is a no-op outside Lambda: its recorder, real
    tracer.tracer = SimpleNamespace(provider=recorder)
    return tracer, recorder, emitter


def test_a_busy_conversations_id_never_reaches_an_xray_trace(mocked_aws):
    ledger = mocked_aws["ledger"]
    conv = "wa-5511988887777-20261205"
    ledger.acquire_conversation(conversation_id=conv, customer_id=1001, lease_s=600)  # another invocation's lease
    orch, _ = build(ScriptedModel(text_reply("nunca")), ledger, CountingInvoker())
    orch.tracer, recorder, emitter = _xray_tracer()
    recorder.begin_segment("orchestrator", sampling=1)
    with pytest.raises(ConversationBusyError):
        orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                                mensagem="oi"), Deadline.after(60))
    recorder.end_segment()
    sent = "".join(emitter.sent)
    (segment,) = [json.loads(s) for s in emitter.sent]
    (turn,) = segment["subsegments"]
    assert turn["name"] == "## turn" and turn["fault"] is True
    assert turn["annotations"]["error_type"] == "ConversationBusyError"
    assert "5511988887777" not in sent, sent

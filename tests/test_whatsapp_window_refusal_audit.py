"""A reply the Cloud API refuses because the customer's 24-hour window closed (error
131047) is a normal event: the consumer records ``RESPOSTA_FORA_DA_JANELA`` — on the
conversation's hash chain, like every other writer, so ``scripts/auditoria verificar``
finds every chain intact and nothing outside it."""
from __future__ import annotations

import dataclasses

import pytest

from cadencia_shared.audit_anchors import LedgerAnchors
from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.catalog import LEDGER_TABLE
from canal_whatsapp.graph import OutsideServiceWindow
from canal_whatsapp.outbox import OutboxStatus, OutgoingReply
from canal_whatsapp.settings import SenderSettings
from orchestrator import whatsapp_consumer
from orchestrator.settings import OrchestratorSettings
from scripts import auditoria


class ClosedWindow:
    """The Cloud API's answer once the customer's service window has closed."""

    def send_text(self, reply, access_token):
        raise OutsideServiceWindow("131047")


@pytest.fixture
def consumer_sender(mocked_aws, monkeypatch):
    # The consumer's environment as infra.controls.add_audit_table gives it.
    monkeypatch.setenv("LEDGER_TABLE", LEDGER_TABLE)
    monkeypatch.setenv("AUDIT_TABLE", AUDIT_TABLE)
    whatsapp_consumer.reset()
    built = whatsapp_consumer.sender(OrchestratorSettings.from_env(), SenderSettings.from_env())
    yield dataclasses.replace(built, graph=ClosedWindow(), access_token=lambda: "t", sleep=lambda s: None)
    whatsapp_consumer.reset()


def test_a_closed_window_refusal_is_recorded_on_the_chain_and_the_verifier_passes(consumer_sender, mocked_aws,
                                                                                  capsys):
    client = mocked_aws["dynamodb"]
    conversation = "wa-1001-20270101"
    reply = OutgoingReply.answering("wamid.JANELA1", conversation_id=conversation, phone_number_id="1",
                                    to="5511", body="oi")
    assert consumer_sender.deliver(reply) is OutboxStatus.OUTSIDE_WINDOW
    chain = AuditChain(AUDIT_TABLE, client, anchor_table=LEDGER_TABLE)
    assert [r["evento"] for r in chain.records(conversation)] == ["RESPOSTA_FORA_DA_JANELA"]
    unchained = LedgerAnchors(client, LEDGER_TABLE).unchained_records()
    assert unchained == {}
    code = auditoria.verify(chain, None, unchained)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "íntegra (1 registros)" in out

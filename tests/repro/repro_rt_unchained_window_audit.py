"""The WhatsApp consumer's Sender writes RESPOSTA_FORA_DA_JANELA through a Ledger built
WITHOUT the audit chain (orchestrator/whatsapp_consumer.py: sender()), so a normal
closed-window refusal (131047) makes `auditoria verificar` exit 4 (FORA DA CADEIA)."""
from __future__ import annotations

import inspect

from cadencia_shared.audit_anchors import LedgerAnchors
from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.ledger import Ledger
from canal_whatsapp.delivery import Sender
from canal_whatsapp.graph import OutsideServiceWindow
from canal_whatsapp.outbox import Outbox, OutboxStatus, OutgoingReply
from orchestrator import whatsapp_consumer
from scripts import auditoria


class ClosedWindow:
    def send_text(self, reply, access_token):
        raise OutsideServiceWindow("131047")


def test_closed_window_reply_flags_the_verifier(mocked_aws, capsys):
    src = inspect.getsource(whatsapp_consumer.sender)
    assert "Outbox(Ledger(settings.ledger.table_name, client(\"dynamodb\", settings.aws)))" in src  # no audit_chain
    client = mocked_aws["dynamodb"]
    table = mocked_aws["ledger"].table_name
    ledger = Ledger(table, client)  # exactly as the consumer builds it
    sender = Sender(outbox=Outbox(ledger), graph=ClosedWindow(), access_token=lambda: "t", sleep=lambda s: None)
    reply = OutgoingReply.answering("wamid.RT1", conversation_id="wa-1001-20270101", phone_number_id="1",
                                    to="5511", body="oi")
    assert sender.deliver(reply) is OutboxStatus.OUTSIDE_WINDOW
    from cadencia_shared.audit_chain import AUDIT_TABLE as audit_table
    chain = AuditChain(audit_table, client, anchor_table=table)
    code = auditoria.verify(chain, None, LedgerAnchors(client, table).unchained_records())
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out

"""The inbound queue's seal, attacked on the local stack: forged messages put straight
on the WhatsApp FIFO queue (as an attacker able to call ``sqs:SendMessage`` would),
each naming demo customer 1001 and asking for a refund, each with the reply sent to
another number. The real consumer (its own process, the real orchestrator and
tools, the scripted model) must refuse every one before anything runs
(docs/decisions/queue-assertion.md): no turn, no debit, no message sent.

A message the ingress really signed goes last on the same FIFO group: its answer
proves the consumer ran, and read every forged message before it.

    python -m scripts.selo_fila   (the local stack must be up)

Prints one row per forged message; exits 1 when any had an effect or was not refused.
"""

from __future__ import annotations

import json
import random
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from cadencia_shared.ledger import Ledger
from canal_whatsapp import assertion
from canal_whatsapp.conversation import conversation_id
from canal_whatsapp.models import QueuedKind, QueuedMessage
from orchestrator.whatsapp_consumer import MAX_ASSERTION_AGE_S

from .harness.scripted_model import ScriptedModelServer
from .local_stack import postgres
from .local_stack.aws import session_client
from .local_stack.gateway_admin import GatewayAdmin
from .local_stack.whatsapp_channel import LocalChannel
from .local_stack.whatsapp_fake import BUSINESS_PHONE_NUMBER_ID
from .local_stack.whatsapp_model import ChatPolicy
from .verdicts import STACK_DOWN_EXIT, checks_table, running_stack, verdict

CUSTOMER, CUSTOMER_WA = 1001, "5511987654321"  # Ana (sql/demo.sql)
OTHER_CUSTOMER, OTHER_WA = 1002, "5521998765432"  # Bruno: holds a message the ingress signed for him
GROUP = f"wa-cliente-{CUSTOMER}"
REFUND = "quero reembolso do pedido 4821 de R$ 50,00"


@dataclass(frozen=True)
class Forged:
    case: str
    body: str
    conversation: str
    reply_to: str
    expected_reason: str


@dataclass(frozen=True)
class Row:
    case: str
    expected_reason: str
    reason: str | None  # what the consumer logged (None: not refused)
    turns: int
    sends: int

    @property
    def ok(self) -> bool:
        return self.reason == self.expected_reason and self.turns == 0 and self.sends == 0


def _message(conversation: str, *, customer: int, wa_id: str, text: str = REFUND) -> QueuedMessage:
    return QueuedMessage(tipo=QueuedKind.TEXT, mensagemId=f"wamid.SELO{secrets.token_hex(8)}", waId=wa_id,
                         phoneNumberId=BUSINESS_PHONE_NUMBER_ID, conversaId=conversation, clienteId=customer,
                         mensagem=text)


def _fields(message: QueuedMessage) -> dict[str, Any]:
    return message.model_dump(mode="json", exclude_none=True)


def forged_messages(key: str, now_s: float, days: list[int]) -> list[Forged]:
    """One forged body per way of forging it, each in a conversation of its own."""
    convs = [conversation_id(CUSTOMER, str(day * 86400 + 43200)) for day in days]
    attackers = [f"5561955{n:06d}" for n in random.sample(range(10**6), len(days))]
    out = []

    def add(case: str, body: str, i: int, reply_to: str, reason: assertion.Refusal) -> None:
        out.append(Forged(case, body, convs[i], reply_to, reason.value))

    # 1. A plain body, as the queue took before the seal.
    add("sem asserção", json.dumps(_fields(_message(convs[0], customer=CUSTOMER, wa_id=attackers[0]))), 0,
        attackers[0], assertion.Refusal.MISSING)
    # 2. Signed, but with a key of the attacker's own.
    add("outra chave", assertion.sign(_fields(_message(convs[1], customer=CUSTOMER, wa_id=attackers[1])),
                                      secrets.token_hex(32), int(now_s)), 1, attackers[1], assertion.Refusal.MISMATCH)
    # 3. A body the ingress signed for Bruno, its customer changed to Ana.
    signed = json.loads(assertion.sign(_fields(_message(convs[2], customer=OTHER_CUSTOMER, wa_id=OTHER_WA)),
                                       key, int(now_s)))
    add("cliente trocado", json.dumps({**signed, "clienteId": CUSTOMER}), 2, OTHER_WA, assertion.Refusal.MISMATCH)
    # 4. A body the ingress signed for Ana, its reply address changed to the attacker's.
    signed = json.loads(assertion.sign(_fields(_message(convs[3], customer=CUSTOMER, wa_id=CUSTOMER_WA)),
                                       key, int(now_s)))
    add("destino trocado", json.dumps({**signed, "waId": attackers[3]}), 3, attackers[3],
        assertion.Refusal.MISMATCH)
    # 5. Signed with the real key, but issued longer ago than any legitimate message lives.
    add("expirada", assertion.sign(_fields(_message(convs[4], customer=CUSTOMER, wa_id=attackers[4])), key,
                                   int(now_s) - MAX_ASSERTION_AGE_S - 60), 4, attackers[4], assertion.Refusal.STALE)
    # 6. A resend-queue body on the inbound queue (the record's source decides, not its body).
    add("reenvio na fila de entrada", json.dumps({"reenvio": f"wamid.SELO{secrets.token_hex(8)}"}), 5, attackers[5],
        assertion.Refusal.MISSING)
    return out


def _refusals(channel: LocalChannel) -> dict[str, str]:
    """messageId -> the reason each refusal logged (the consumer's JSON log lines)."""
    out = {}
    for log in Path(channel.dir).glob("consumer-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("message") == "queue message refused: not asserted by the ingress":
                out[str(entry.get("messageId"))] = str(entry.get("motivo"))
    return out


def run(state: Any, model: ScriptedModelServer, timeout_s: float = 120) -> tuple[list[Row], int, bool]:
    """(one row per forged message, debits during the run, whether the signed control was answered)."""
    postgres.apply_sql(state.postgres, ("demo.sql",))
    model.activate(ChatPolicy())
    env = {"MODEL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": model.base_url, "MODEL_ID": "cadencia-roteirizado",
           "ANTHROPIC_API_KEY": "local-scripted-model"}
    gateway = GatewayAdmin(state.gateway_url)
    ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
    debits_before = len(gateway.debits())
    # Days of their own (2030-2050), so each run's conversations are new.
    days = random.sample(range(21915, 29220), 7)
    with LocalChannel(state, model_env=env, consumers=1, log_level="INFO") as channel:
        forged = forged_messages(channel.queue_key, time.time(), days[:6])
        ids = {}
        for f in forged:
            sent = channel.sqs.send_message(QueueUrl=channel.queue_url, MessageBody=f.body, MessageGroupId=GROUP,
                                            MessageDeduplicationId=secrets.token_hex(16))
            ids[f.case] = sent["MessageId"]
        control = _message(conversation_id(CUSTOMER, str(days[6] * 86400 + 43200)), customer=CUSTOMER,
                           wa_id=CUSTOMER_WA, text="qual o status do pedido 4821?")
        channel.sqs.send_message(QueueUrl=channel.queue_url, MessageBody=channel.seal(control), MessageGroupId=GROUP,
                                 MessageDeduplicationId=secrets.token_hex(16))
        answered = bool(channel.wait_for_replies(CUSTOMER_WA, 1, timeout_s))
        channel.wait_until_drained(timeout_s)
        channel.stop_consumers()
        refused = _refusals(channel)
        rows = [Row(f.case, f.expected_reason, refused.get(ids[f.case]),
                    turns=0 if ledger.read_conversation(f.conversation) is None else 1,
                    sends=len(channel.api.sent_to(f.reply_to))) for f in forged]
    return rows, len(gateway.debits()) - debits_before, answered


def main() -> int:
    console = Console()
    state = running_stack(console)
    if state is None:
        return STACK_DOWN_EXIT
    with ScriptedModelServer() as model:
        rows, debits, answered = run(state, model)
    table = checks_table("selo da fila de entrada do WhatsApp — mensagens forjadas",
                         "mensagem forjada", "recusa esperada", "recusa registrada", "turnos", "envios")
    for row in rows:
        table.add_row(row.case, row.expected_reason, row.reason or "—", str(row.turns), str(row.sends), verdict(row.ok))
    console.print(table)
    console.print(f"débitos no gateway durante a execução: {debits}")
    console.print(f"mensagem assinada pela entrada respondida (controle): {'sim' if answered else 'não'}")
    return 0 if answered and debits == 0 and all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

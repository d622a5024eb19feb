"""How much the inbound dedupe adds to the conversation item, per answered message.

    .venv/bin/python -m scripts.perf.inbound_growth [--messages 200] [--every-s 600]

The lease and the commit rewrite the conversation item, so each KB it carries is one more
write unit on both. Answers ``--messages`` customer messages ``--every-s`` apart (real
wamid-shaped ids, a typical agent reply) on a conversation with no history, through the
ledger's own lease and commit (moto in-process), and prints the item's billed size by
DynamoDB's item-size rules (``scripts/perf/aws_count.item_size``) as the answered ids
accumulate and as the redelivery window prunes them.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for entry in (str(ROOT / "functions"), str(ROOT)):  # runnable as the docstring says, from the checkout
    if entry not in sys.path:
        sys.path.insert(0, entry)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from cadencia_shared.ledger import INBOUND_TTL_S, ConversationStatus, Ledger, table_definition  # noqa: E402

from .aws_count import item_size, write_units  # noqa: E402

CONVERSATION = "wa-1001-20260312"
# What the loop stores for a redelivery (orchestrator/loop.py ``_STORED_REPLY``), with a typical answer.
REPLY = {"status": "ativa", "motivo": "resposta",
         "resposta": "Seu pedido 4821 foi entregue ontem às 14h. Posso ajudar em algo mais?"}


def _wamid() -> str:
    return "wamid." + base64.b64encode(b"\x15\x02\x00\x12\x18" + uuid.uuid4().bytes).decode()


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--messages", type=int, default=200)
    args.add_argument("--every-s", type=int, default=600)
    opts = args.parse_args()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    now = [1_800_000_000.0]
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(**table_definition("crescimento"))
        ledger = Ledger("crescimento", client, clock=lambda: now[0])
        conv = CONVERSATION

        def size() -> int:
            item = client.get_item(TableName="crescimento", Key={"pk": {"S": f"conversa#{conv}"}},
                                   ConsistentRead=True)["Item"]
            return item_size(item)

        state = ledger.acquire_conversation(conversation_id=conv, customer_id=1001, lease_s=60)
        ledger.commit_conversation(state, messages=[], status=ConversationStatus.ACTIVE)
        base = size()
        print(f"conversation item, empty history, no message answered: {base} B")
        print("answered | item bytes | added by the dedupe | bytes per answered id (beyond the kept replies) | "
              "write units per lease/commit")
        marks, first_two = {1, 2, 3, 10, 50, 100, 200, 500, 1000, 2000}, 0
        window = INBOUND_TTL_S // opts.every_s
        for n in range(1, opts.messages + 1):
            wamid = _wamid()
            state = ledger.acquire_conversation(conversation_id=conv, customer_id=1001, lease_s=60, message_id=wamid)
            ledger.commit_conversation(state, messages=[], status=ConversationStatus.ACTIVE,
                                       reply=REPLY)
            now[0] += opts.every_s
            current = size()
            if n == 2:
                first_two = current
            if n in marks or n == opts.messages:
                per_id = (current - first_two) / (min(n, window) - 2) if min(n, window) > 2 else float("nan")
                print(f"{n:8d} | {current:10d} | {current - base:19d} | {per_id:47.1f} | {write_units(current)}")
        print(f"ids kept: those answered in the last {INBOUND_TTL_S} s = {window} messages at one every "
              f"{opts.every_s} s")


if __name__ == "__main__":
    main()

"""Fixtures' helpers for the WhatsApp channel tests."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

ANA, BRUNO = "5511987654321", "5521998765432"  # demo customers 1001, 1002 (sql/demo.sql)
UNKNOWN = "5561900001111"
_BASE_DAY = datetime(2026, 3, 2, 12, 0, tzinfo=timezone(timedelta(hours=-3)))


def day_ts(n: int, seconds: int = 0) -> int:
    """A message timestamp on the n-th test day: each test talks in its own conversation
    (the session rule is one conversation per customer per São Paulo day)."""
    return int((_BASE_DAY + timedelta(days=n, seconds=seconds)).timestamp())


def drain(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message in the queue (received and deleted), with its FIFO attributes."""
    out = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                  AttributeNames=["All"]).get("Messages", [])
        if not got:
            return out
        for m in got:
            out.append({"body": json.loads(m["Body"]), "group": m["Attributes"]["MessageGroupId"],
                        "dedup": m["Attributes"]["MessageDeduplicationId"]})
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])

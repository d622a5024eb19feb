"""Fixtures' helpers for the WhatsApp channel tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

ANA, BRUNO = "5511987654321", "5521998765432"  # demo customers 1001, 1002 (sql/demo.sql)
UNKNOWN = "5561900001111"
_BASE_DAY = datetime(2026, 3, 2, 12, 0, tzinfo=timezone(timedelta(hours=-3)))


def day_ts(n: int, seconds: int = 0) -> int:
    """A message timestamp on the n-th test day: each test talks in its own conversation
    (the session rule is one conversation per customer per São Paulo day)."""
    return int((_BASE_DAY + timedelta(days=n, seconds=seconds)).timestamp())


def verified(body: str, key: str) -> dict[str, Any]:
    """A queued body's fields once its assertion verified with ``key`` (the channel's queue
    key): what the consumer would read. A body that does not verify fails the test."""
    import time

    from canal_whatsapp import assertion

    fields = assertion.verify(body, key, now_s=time.time(), max_age_s=3600)
    assert not isinstance(fields, assertion.Refusal), f"the ingress's assertion does not verify: {fields}"
    return fields


def drain(sqs: Any, queue_url: str, key: str) -> list[dict[str, Any]]:
    """Every message in the queue (received and deleted), with its FIFO attributes; each
    body as the consumer reads it, after its assertion verified with ``key``."""
    out = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                  AttributeNames=["All"]).get("Messages", [])
        if not got:
            return out
        for m in got:
            out.append({"body": verified(m["Body"], key), "group": m["Attributes"]["MessageGroupId"],
                        "dedup": m["Attributes"]["MessageDeduplicationId"]})
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])


@contextmanager
def scripted_channel(local_stack: Any, **channel_options: Any) -> Iterator[Any]:
    """The whole local channel (demo customers, the scripted chat model, ingress and
    consumers as processes), for a module or a test."""
    from scripts.harness.scripted_model import ScriptedModelServer
    from scripts.local_stack import postgres
    from scripts.local_stack.whatsapp_channel import LocalChannel
    from scripts.local_stack.whatsapp_model import ChatPolicy

    postgres.apply_sql(local_stack.postgres, ("demo.sql",))
    with ScriptedModelServer() as model:
        model.activate(ChatPolicy())
        env = {"MODEL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": model.base_url, "MODEL_ID": "cadencia-roteirizado",
               "ANTHROPIC_API_KEY": "local-scripted-model"}
        with LocalChannel(local_stack, model_env=env, **channel_options) as channel:
            yield channel

"""AWS adapters of the ingress: the FIFO queue and the channel's secrets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider

from .models import QueueItem

SECRET_MAX_AGE_S = 300  # a rotated App Secret is picked up within five minutes


SQS_BATCH = 10  # SendMessageBatch's limit


class QueueSendFailed(Exception):
    """Some messages were not enqueued: the webhook fails (502) so Meta delivers it again;
    what was enqueued is absorbed by the deduplication (SQS FIFO, then the ledger)."""


class SqsFifoQueue:
    def __init__(self, sqs_client: Any, queue_url: str) -> None:
        self.sqs = sqs_client
        self.queue_url = queue_url

    def send_all(self, items: Sequence[QueueItem]) -> None:
        """In order, ten per SendMessageBatch (a FIFO batch keeps its order within a group)."""
        for start in range(0, len(items), SQS_BATCH):
            chunk = items[start:start + SQS_BATCH]
            resp = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "MessageBody": item.body,
                 "MessageGroupId": item.group_id, "MessageDeduplicationId": item.deduplication_id}
                for i, item in enumerate(chunk)])
            if resp.get("Failed"):
                raise QueueSendFailed(f"{len(resp['Failed'])} of {len(chunk)} not enqueued")


class SecretsManagerChannelSecrets:
    """Each secret is a plain string, created without a value by the stack and filled
    by the deployer. An empty value verifies nothing (every request 401/403); a
    secret that cannot be read raises, so the webhook answers 502 and Meta retries."""

    def __init__(self, secrets_client: Any, *, app_secret_name: str, verify_token_name: str,
                 queue_key_name: str) -> None:
        self.provider = SecretsProvider(boto3_client=secrets_client)
        self.names = {"app": app_secret_name, "verify": verify_token_name, "queue": queue_key_name}

    def _read(self, name: str) -> str:
        value = self.provider.get(name, max_age=SECRET_MAX_AGE_S)
        return value.strip() if isinstance(value, str) else ""

    def app_secret(self) -> str:
        return self._read(self.names["app"])

    def verify_token(self) -> str:
        return self._read(self.names["verify"])

    def queue_key(self) -> str:
        """The key of the assertion on every queued body (``canal_whatsapp.assertion``)."""
        return self._read(self.names["queue"])


class QueueKey:
    """The consumer's read of the queue key (cached like the ingress's secrets)."""

    def __init__(self, secrets_client: Any, name: str) -> None:
        self.provider = SecretsProvider(boto3_client=secrets_client)
        self.name = name

    def __call__(self) -> str:
        value = self.provider.get(self.name, max_age=SECRET_MAX_AGE_S)
        return value.strip() if isinstance(value, str) else ""

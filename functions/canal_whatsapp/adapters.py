"""AWS adapters of the ingress: the FIFO queue and the channel's secrets."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider

from .models import QueuedMessage

SECRET_MAX_AGE_S = 300  # a rotated App Secret is picked up within five minutes


class SqsFifoQueue:
    def __init__(self, sqs_client: Any, queue_url: str) -> None:
        self.sqs = sqs_client
        self.queue_url = queue_url

    def send(self, message: QueuedMessage, *, group_id: str, deduplication_id: str) -> None:
        self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=message.model_dump_json(exclude_none=True),
            MessageGroupId=group_id,
            MessageDeduplicationId=deduplication_id,
        )


class SecretsManagerChannelSecrets:
    """Each secret is a plain string, created without a value by the stack and filled
    by the deployer. An empty value verifies nothing (every request 401/403); a
    secret that cannot be read raises, so the webhook answers 502 and Meta retries."""

    def __init__(self, secrets_client: Any, *, app_secret_name: str, verify_token_name: str) -> None:
        self.provider = SecretsProvider(boto3_client=secrets_client)
        self.names = {"app": app_secret_name, "verify": verify_token_name}

    def _read(self, name: str) -> str:
        value = self.provider.get(name, max_age=SECRET_MAX_AGE_S)
        return value.strip() if isinstance(value, str) else ""

    def app_secret(self) -> str:
        return self._read(self.names["app"])

    def verify_token(self) -> str:
        return self._read(self.names["verify"])

"""Configuration of the channel's Lambdas (environment variables set by the stack)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from pydantic import Field

from cadencia_shared.aws import AwsSettings
from cadencia_shared.settings import EnvSettings

APP_SECRET_NAME = "cadencia/whatsapp/app-secret"
VERIFY_TOKEN_NAME = "cadencia/whatsapp/verify-token"
ACCESS_TOKEN_NAME = "cadencia/whatsapp/access-token"
# The key of the ingress's assertion on every queued body (canal_whatsapp.assertion):
# read by the ingress and the WhatsApp consumer only.
QUEUE_KEY_NAME = "cadencia/whatsapp/queue-key"
INGRESS_FUNCTION_NAME = "cadencia-canal-whatsapp-entrada"
INBOUND_QUEUE_NAME = "cadencia-whatsapp-entrada.fifo"
RESEND_QUEUE_NAME = "cadencia-whatsapp-reenvios"
# A person's reply (orchestrator/human_reply.py): the attendant's tooling invokes it.
HUMAN_REPLY_FUNCTION_NAME = "cadencia-resposta-atendente"
GRAPH_API_BASE_URL = "https://graph.facebook.com/v23.0"


class IngressSettings(EnvSettings):
    queue_url: str = Field(alias="WHATSAPP_QUEUE_URL")
    app_secret_name: str = Field(APP_SECRET_NAME, alias="WHATSAPP_APP_SECRET_NAME")
    verify_token_name: str = Field(VERIFY_TOKEN_NAME, alias="WHATSAPP_VERIFY_TOKEN_NAME")
    queue_key_name: str = Field(QUEUE_KEY_NAME, alias="WHATSAPP_QUEUE_KEY_NAME")
    max_body_bytes: int = Field(128 * 1024, alias="WHATSAPP_MAX_BODY_BYTES", ge=1024, le=1024 * 1024)
    aws: AwsSettings = Field(default_factory=AwsSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        base = super().from_env(environ)
        return base.model_copy(update={"aws": AwsSettings.from_env(environ)})


class SenderSettings(EnvSettings):
    """How replies go out (read by the orchestrator's queue consumer)."""

    graph_base_url: str = Field(GRAPH_API_BASE_URL, alias="WHATSAPP_GRAPH_URL")
    access_token_name: str = Field(ACCESS_TOKEN_NAME, alias="WHATSAPP_ACCESS_TOKEN_NAME")
    send_timeout_s: float = Field(5.0, alias="WHATSAPP_SEND_TIMEOUT_S", gt=0, le=30)
    send_attempts: int = Field(3, alias="WHATSAPP_SEND_ATTEMPTS", ge=1, le=6)
    backoff_base_s: float = Field(0.5, alias="WHATSAPP_BACKOFF_BASE_S", ge=0, le=5)
    # How long a claimed send may stay "enviando" before it counts as an unknown
    # outcome; longer than one send (its timeout) by a margin.
    send_lease_s: int = Field(60, alias="WHATSAPP_SEND_LEASE_S", ge=2, le=900)
    # Where a reply the Cloud API refused for a temporary reason waits (canal_whatsapp.resends);
    # unset: attempts used up are final (falhou).
    resend_queue_url: str | None = Field(None, alias="WHATSAPP_RESEND_QUEUE_URL")
    # The first resend's delay, doubling each time up to SQS's 15 minutes.
    resend_base_s: int = Field(30, alias="WHATSAPP_RESEND_BASE_S", ge=0, le=900)


class QueueKeySettings(EnvSettings):
    """Where the WhatsApp consumer reads the queue key (the ingress's assertion)."""

    queue_key_name: str = Field(QUEUE_KEY_NAME, alias="WHATSAPP_QUEUE_KEY_NAME")

"""The refund's adapters and service wiring (the Lambda's handler and the reconciler's
share it; the reconciler imports this module, not the handler, whose edge is SEAL's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from cadencia_shared import db
from cadencia_shared.aws import client
from cadencia_shared.ledger import Ledger

from .gateway import PaymentGatewayClient
from .logic import RefundService
from .repository import RefundOrders
from .settings import RefundSettings


@cache
def _secrets(secrets_client: Any) -> Any:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto3_client=secrets_client)


@dataclass(frozen=True)
class RefundAdapters:
    ledger: Ledger
    gateway: PaymentGatewayClient
    secrets_client: Any
    read_gateway_token: Callable[[], str]


@cache
def adapters(settings: RefundSettings) -> RefundAdapters:
    """Built once per execution environment (and per configuration)."""
    secrets_client = client("secretsmanager", settings.aws)

    def read_gateway_token() -> str:
        # Deferred: Powertools' parameters utility imports boto3 (and s3transfer), and
        # only a refund that reaches the gateway reads the token (not a duplicate, an
        # ineligible order or a refused event). Imported once; the provider is cached.
        secrets = _secrets(secrets_client)
        # Powertools caches the value for max_age seconds: a warm function does not
        # call Secrets Manager on every refund, and never before a claim.
        value = secrets.get(settings.gateway.secret_name, max_age=settings.gateway.secret_max_age_s, transform="json")
        token: str = value["token"]  # the secret's JSON shape: {"token": "..."}
        return token

    return RefundAdapters(
        ledger=Ledger(settings.ledger.table_name, client("dynamodb", settings.aws)),
        gateway=PaymentGatewayClient(settings.gateway.url, settings.gateway.timeout_s),
        secrets_client=secrets_client,
        read_gateway_token=read_gateway_token,
    )


def refund_service(settings: RefundSettings) -> RefundService:
    """The refund's logic wired to its adapters (also the reconciler's, with its own DB user)."""
    wired = adapters(settings)
    return RefundService(
        ledger=wired.ledger,
        orders=RefundOrders(db.connection(settings.db)),
        gateway=wired.gateway,
        read_gateway_token=wired.read_gateway_token,
        claim_lease_s=settings.gateway.claim_lease_s,
        idempotency_window_s=int(settings.gateway.idempotency_window_h * 3600),
    )


def reset_adapters() -> None:
    """Forget cached clients (tests switch between mocked and local AWS)."""
    adapters.cache_clear()
    _secrets.cache_clear()

"""Lambda entry point of ``cadencia-emitir-reembolso`` (thin: wiring only)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from aws_lambda_powertools.utilities.parameters import SecretsProvider

from cadencia_shared import db
from cadencia_shared.aws import client
from cadencia_shared.handler import tool_handler
from cadencia_shared.ledger import Ledger
from cadencia_shared.observability import logger_for
from cadencia_shared.results import ToolResponse

from .gateway import PaymentGatewayClient
from .logic import TOOL, RefundService
from .models import RefundRequest
from .repository import RefundOrders
from .settings import RefundSettings

logger = logger_for(TOOL)


@cache
def _adapters(settings: RefundSettings) -> tuple[Ledger, PaymentGatewayClient, Callable[[], str]]:
    """Built once per execution environment (and per configuration)."""
    secrets = SecretsProvider(boto3_client=client("secretsmanager", settings.aws))

    def read_gateway_token() -> str:
        # Powertools caches the value for max_age seconds: a warm function does not
        # call Secrets Manager on every refund, and never before a claim.
        value = secrets.get(settings.gateway.secret_name, max_age=settings.gateway.secret_max_age_s, transform="json")
        return value["token"]

    return (
        Ledger(settings.ledger.table_name, client("dynamodb", settings.aws)),
        PaymentGatewayClient(settings.gateway.url, settings.gateway.timeout_s),
        read_gateway_token,
    )


@tool_handler(ferramenta=TOOL, model=RefundRequest, logger=logger)
def lambda_handler(request: RefundRequest) -> ToolResponse:
    settings = RefundSettings.from_env()
    ledger, gateway, read_gateway_token = _adapters(settings)
    service = RefundService(
        ledger=ledger,
        orders=RefundOrders(db.connection(settings.db)),
        gateway=gateway,
        read_gateway_token=read_gateway_token,
        claim_lease_s=settings.gateway.claim_lease_s,
    )
    return service.issue(request)


def reset_adapters() -> None:
    """Forget cached clients (tests switch between mocked and local AWS)."""
    _adapters.cache_clear()

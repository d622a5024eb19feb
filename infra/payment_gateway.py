"""The payment gateway as the stack sees it: the secret holding its bearer token,
and the settings every function that talks to it gets (the refund tool, the
reconciler). The gateway itself is outside AWS; the deployer gives its URL."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from cadencia_shared.catalog import GATEWAY_SECRET_NAME

from .base import acknowledge, pin
from .config import StackConfig
from .contract import Ids

GATEWAY_TIMEOUT_S = 3
# Longer than the refund's own timeout: a claim in progress is never taken over
# while the invocation that holds it may still be running.
REFUND_CLAIM_LEASE_S = 30
# Hours a claim may be re-sent with its Idempotency-Key after its first possible send:
# under Stripe's 24 h (keys may be pruned after that), so a re-send is never a new debit.
GATEWAY_IDEMPOTENCY_WINDOW_H = 23


def gateway_secret(scope: Construct) -> secretsmanager.Secret:
    # The deployer replaces the generated token with the gateway's real one
    # (docs/infrastructure.md); the JSON shape {"token": ...} is what the refund reads.
    secret = secretsmanager.Secret(
        scope, "GatewaySecretResource",
        secret_name=GATEWAY_SECRET_NAME,
        description="Payment gateway bearer token, read only by cadencia-emitir-reembolso",
        generate_secret_string=secretsmanager.SecretStringGenerator(
            secret_string_template="{}", generate_string_key="token", exclude_punctuation=True, password_length=48),
        removal_policy=RemovalPolicy.DESTROY,
    )
    pin(secret, Ids.GATEWAY_SECRET)
    acknowledge(secret, "AwsSolutions-SMG4", "The token is issued by the payment gateway; it is rotated in the "
                "gateway's console and then written here (put-secret-value). Secrets Manager cannot mint it.")
    return secret


def gateway_environment(config: StackConfig) -> dict[str, str]:
    """Where the gateway is, which secret holds its token, and how long to wait for it."""
    return {
        "GATEWAY_URL": config.gateway_url,
        "GATEWAY_SECRET_NAME": GATEWAY_SECRET_NAME,
        "GATEWAY_TIMEOUT_S": str(GATEWAY_TIMEOUT_S),
        "REFUND_CLAIM_LEASE_S": str(REFUND_CLAIM_LEASE_S),
        "GATEWAY_IDEMPOTENCY_WINDOW_H": str(GATEWAY_IDEMPOTENCY_WINDOW_H),
    }

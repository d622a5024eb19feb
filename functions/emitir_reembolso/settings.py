from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from pydantic import Field

from cadencia_shared.aws import AwsSettings
from cadencia_shared.catalog import GATEWAY_SECRET_NAME
from cadencia_shared.settings import DatabaseSettings, EnvSettings, LedgerSettings


class GatewaySettings(EnvSettings):
    url: str = Field(alias="GATEWAY_URL")
    secret_name: str = Field(GATEWAY_SECRET_NAME, alias="GATEWAY_SECRET_NAME")
    # connect + read; a refund never waits longer than this for the gateway.
    timeout_s: float = Field(3.0, alias="GATEWAY_TIMEOUT_S", gt=0, le=20)
    secret_max_age_s: int = Field(300, alias="GATEWAY_SECRET_MAX_AGE_S", ge=0)
    # How long a claim in progress blocks others before it counts as abandoned
    # (and is reconciled with the gateway). Longer than the function timeout.
    claim_lease_s: int = Field(30, alias="REFUND_CLAIM_LEASE_S", ge=1)
    # How long the gateway is trusted to remember an Idempotency-Key, from the claim's
    # first possible send. Past it a re-send could be a new debit, so the claim is
    # never re-sent: it stays unknown for a person. Stripe may prune keys after 24 h.
    idempotency_window_h: float = Field(23.0, alias="GATEWAY_IDEMPOTENCY_WINDOW_H", gt=0, le=24 * 30)


class RefundSettings(EnvSettings):
    aws: AwsSettings
    db: DatabaseSettings
    ledger: LedgerSettings
    gateway: GatewaySettings

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        return cls(
            aws=AwsSettings.from_env(environ),
            db=DatabaseSettings.from_env(environ),
            ledger=LedgerSettings.from_env(environ),
            gateway=GatewaySettings.from_env(environ),
        )

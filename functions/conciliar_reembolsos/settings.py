from __future__ import annotations

from pydantic import Field

from cadencia_shared.aws import AwsSettings
from cadencia_shared.settings import DatabaseSettings, EnvSettings, LedgerSettings
from emitir_reembolso.settings import GatewaySettings


class PassSettings(EnvSettings):
    # Claims visited per invocation: a pass must end well inside the function timeout
    # (each claim costs at most one gateway request); the rest wait for the next pass.
    batch: int = Field(25, alias="RECONCILER_BATCH", ge=1, le=1000)


class ReconcilerSettings(EnvSettings):
    aws: AwsSettings
    db: DatabaseSettings
    ledger: LedgerSettings
    gateway: GatewaySettings
    run: PassSettings

    @classmethod
    def from_env(cls, environ=None):  # type: ignore[override]
        return cls(
            aws=AwsSettings.from_env(environ),
            db=DatabaseSettings.from_env(environ),
            ledger=LedgerSettings.from_env(environ),
            gateway=GatewaySettings.from_env(environ),
            run=PassSettings.from_env(environ),
        )

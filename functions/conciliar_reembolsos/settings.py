from __future__ import annotations

from pydantic import Field

from cadencia_shared.settings import EnvSettings
from emitir_reembolso.settings import RefundSettings


class PassSettings(EnvSettings):
    # Claims visited per invocation: a pass must end well inside the function timeout
    # (each claim costs at most one gateway request); the rest wait for the next pass.
    batch: int = Field(25, alias="RECONCILER_BATCH", ge=1, le=1000)


class ReconcilerSettings(RefundSettings):
    """The refund's settings (its own DB_USER comes from the environment), plus the pass's."""

    run: PassSettings

    @classmethod
    def from_env(cls, environ=None):  # type: ignore[override]
        refund = RefundSettings.from_env(environ)
        return cls(aws=refund.aws, db=refund.db, ledger=refund.ledger, gateway=refund.gateway,
                   run=PassSettings.from_env(environ))

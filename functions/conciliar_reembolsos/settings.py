from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Self

from pydantic import Field

from cadencia_shared.settings import EnvSettings
from emitir_reembolso.settings import RefundSettings


class PassSettings(EnvSettings):
    # Claims visited per invocation: a pass must end well inside the function timeout
    # (each claim costs at most one gateway request); the rest wait for the next pass.
    batch: int = Field(25, alias="RECONCILER_BATCH", ge=1, le=1000)
    # The books' audit: executed ERP refunds of this many hours back are compared
    # (every reservation always is), at most this many keys per pass.
    audit_window_h: float = Field(2.0, alias="BOOKS_AUDIT_WINDOW_H", gt=0, le=24 * 30)
    audit_max_keys: int = Field(1000, alias="BOOKS_AUDIT_MAX_KEYS", ge=1, le=100_000)
    # Whether the gateway lists its debits (debits.DebitListing); strict "true"/"false".
    gateway_lists_debits: Literal["true", "false"] = Field("false", alias="GATEWAY_LISTS_DEBITS")


class ReconcilerSettings(RefundSettings):
    """The refund's settings (its own DB_USER comes from the environment), plus the pass's."""

    run: PassSettings

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        refund = RefundSettings.from_env(environ)
        return cls(aws=refund.aws, db=refund.db, ledger=refund.ledger, gateway=refund.gateway,
                   run=PassSettings.from_env(environ))

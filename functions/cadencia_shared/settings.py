"""Typed configuration, read from the process environment.

Each Lambda gets its configuration from environment variables that the CDK stack
sets (and that the local stack sets for in-process runs). Reading them through a
pydantic model turns a missing or malformed variable into one clear error at the
edge instead of a ``KeyError`` deep inside a request.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from decimal import Decimal
from enum import Enum
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from .catalog import DATABASE_NAME, LEDGER_TABLE
from .models import APPROVER_PATTERN, OrderId


class EnvSettings(BaseModel):
    """Base for settings models whose field aliases are environment variable names."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        return cls.model_validate(dict(os.environ if environ is None else environ))


class DbAuth(str, Enum):
    IAM = "iam"  # AWS: a 15-minute token from rds.generate_db_auth_token, over TLS
    PASSWORD = "password"  # local stack: the same code path with a local password


class DatabaseSettings(EnvSettings):
    host: str = Field(alias="DB_HOST")
    port: int = Field(5432, alias="DB_PORT")
    name: str = Field(DATABASE_NAME, alias="DB_NAME")
    user: str = Field(alias="DB_USER")
    auth: DbAuth = Field(DbAuth.IAM, alias="DB_AUTH")
    password: SecretStr | None = Field(None, alias="DB_PASSWORD")
    # Path of the RDS CA bundle (global-bundle.pem). When given, the server
    # certificate and host name are verified (sslmode=verify-full).
    ssl_root_cert: str | None = Field(None, alias="DB_SSL_ROOT_CERT")
    # "require" (encrypted, server NOT authenticated) only when the deployer opted
    # out of the CA bundle (-c allowUnverifiedDbTls=true); the stack writes it.
    # Without it, IAM auth refuses to start rather than send its token to whoever
    # answers TLS.
    ssl_mode: Literal["verify-full", "require"] | None = Field(None, alias="DB_SSL_MODE")
    region: str | None = Field(None, alias="AWS_REGION")
    connect_timeout_s: int = Field(3, alias="DB_CONNECT_TIMEOUT_S", ge=1, le=30)

    @model_validator(mode="after")
    def _credentials_fit_auth(self) -> DatabaseSettings:
        if self.auth is DbAuth.PASSWORD and self.password is None:
            raise ValueError("DB_AUTH=password requires DB_PASSWORD")
        if self.auth is DbAuth.IAM and not self.region:
            raise ValueError("DB_AUTH=iam requires AWS_REGION to sign the auth token")
        if self.ssl_mode == "verify-full" and not self.ssl_root_cert:
            raise ValueError("DB_SSL_MODE=verify-full requires DB_SSL_ROOT_CERT (the RDS CA bundle)")
        if self.auth is DbAuth.IAM and not self.ssl_root_cert and self.ssl_mode != "require":
            raise ValueError("DB_AUTH=iam requires DB_SSL_ROOT_CERT (verify-full), or the explicit "
                             "opt-out DB_SSL_MODE=require")
        return self

    @property
    def sslmode(self) -> str:
        if self.ssl_mode:
            return self.ssl_mode
        if self.ssl_root_cert:
            return "verify-full"
        return "prefer"  # local stack (password auth on loopback)


class LedgerSettings(EnvSettings):
    table_name: str = Field(LEDGER_TABLE, alias="LEDGER_TABLE")


class ApprovalSettings(EnvSettings):
    """The approval policy's configuration, read by the orchestrator's
    confirmation gate and by whoever records decisions (scripts/aprovar.py)."""

    # Above this amount (R$) a refund needs a person; unset: the tool's catalog default.
    threshold: Decimal | None = Field(None, alias="APROVACAO_LIMITE_REAIS", ge=0, max_digits=12, decimal_places=2)
    # Who may decide: comma-separated identities. Empty: nobody, so the gate refuses
    # every call that needs approval (it never executes one).
    approvers_csv: str = Field("", alias="APROVADORES", max_length=4000)
    validity_s: int = Field(24 * 3600, alias="APROVACAO_VALIDADE_S", ge=60, le=7 * 24 * 3600)
    # Part of each tool's version: a new release invalidates pending approvals.
    release: OrderId = Field("local", alias="VERSAO_RELEASE")  # the same anchored id pattern as an order

    @field_validator("approvers_csv")
    @classmethod
    def _each_approver_an_id(cls, value: str) -> str:
        bad = [a for a in _split(value) if not re.fullmatch(APPROVER_PATTERN, a)]
        if bad:
            raise ValueError(f"APROVADORES: {len(bad)} identidade(s) fora do padrão {APPROVER_PATTERN}")
        return value

    @property
    def approvers(self) -> frozenset[str]:
        return frozenset(_split(self.approvers_csv))


def _split(csv: str) -> list[str]:
    return [a.strip() for a in csv.split(",") if a.strip()]

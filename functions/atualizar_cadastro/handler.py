"""Lambda entry point of ``cadencia-atualizar-cadastro``.

The profile change's audit record goes to the tamper-evident hash chain
(``cadencia_shared.audit_chain``), never to a ledger ``auditoria#`` item: the
chain's table is required configuration (``AUDIT_TABLE``), so a deploy that forgot
it fails on the first call, before any row changes, instead of auditing elsewhere.
The ledger is reached only to anchor the chain's head (``auditoria-cabeca#`` items;
the role may touch no other key, infra/contract.py).
"""

from __future__ import annotations

from functools import cache, partial

from pydantic import Field

from cadencia_shared import db
from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.aws import AwsSettings, client
from cadencia_shared.ledger import AuditTrail, Ledger
from cadencia_shared.observability import logger_for
from cadencia_shared.results import ToolResponse
from cadencia_shared.settings import DatabaseSettings, EnvSettings, LedgerSettings
from cadencia_shared.tool_edge import tool_handler

from .logic import TOOL, update_profile
from .models import ProfileUpdateRequest
from .repository import update_own_profile

logger = logger_for(TOOL)


class AuditTableSettings(EnvSettings):
    table_name: str = Field(alias="AUDIT_TABLE", min_length=3)


@cache
def audit_trail_for(aws: AwsSettings, ledger: LedgerSettings, audit: AuditTableSettings) -> AuditTrail:
    dynamodb = client("dynamodb", aws)
    chain = AuditChain(audit.table_name, dynamodb, anchor_table=ledger.table_name)
    return Ledger(ledger.table_name, dynamodb, audit_chain=chain)


@tool_handler(tool=TOOL, model=ProfileUpdateRequest, logger=logger)
def lambda_handler(request: ProfileUpdateRequest) -> ToolResponse:
    # Configuration first: a missing AUDIT_TABLE fails before the database is touched.
    audit = audit_trail_for(AwsSettings.from_env(), LedgerSettings.from_env(), AuditTableSettings.from_env())
    conn = db.connection(DatabaseSettings.from_env())
    return update_profile(request, update=partial(update_own_profile, conn), audit=audit)


def reset_adapters() -> None:
    audit_trail_for.cache_clear()

"""Lambda entry point of ``cadencia-atualizar-cadastro``."""

from __future__ import annotations

from functools import cache, partial

from cadencia_shared import db
from cadencia_shared.aws import AwsSettings, client
from cadencia_shared.handler import tool_handler
from cadencia_shared.ledger import Ledger
from cadencia_shared.observability import logger_for
from cadencia_shared.results import ToolResponse
from cadencia_shared.settings import DatabaseSettings, LedgerSettings

from .logic import TOOL, update_profile
from .models import ProfileUpdateRequest
from .repository import update_own_profile

logger = logger_for(TOOL)


@cache
def ledger_for(aws: AwsSettings, settings: LedgerSettings) -> Ledger:
    return Ledger(settings.table_name, client("dynamodb", aws))


@tool_handler(tool=TOOL, model=ProfileUpdateRequest, logger=logger)
def lambda_handler(request: ProfileUpdateRequest) -> ToolResponse:
    conn = db.connection(DatabaseSettings.from_env())
    ledger = ledger_for(AwsSettings.from_env(), LedgerSettings.from_env())
    return update_profile(request, update=partial(update_own_profile, conn), ledger=ledger)


def reset_adapters() -> None:
    ledger_for.cache_clear()

"""Lambda entry point of ``cadencia-consultar-rastreio``."""

from __future__ import annotations

from functools import partial

from cadencia_shared import db
from cadencia_shared.handler import tool_handler
from cadencia_shared.observability import logger_for
from cadencia_shared.results import ToolResponse
from cadencia_shared.settings import DatabaseSettings

from .logic import TOOL, tracking
from .models import TrackingRequest
from .repository import fetch_tracking

logger = logger_for(TOOL)


@tool_handler(ferramenta=TOOL, model=TrackingRequest, logger=logger)
def lambda_handler(request: TrackingRequest) -> ToolResponse:
    conn = db.connection(DatabaseSettings.from_env())
    return tracking(request, partial(fetch_tracking, conn))

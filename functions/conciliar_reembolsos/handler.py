"""Lambda entry point of ``cadencia-conciliar-reembolsos`` (thin: wiring only).

Invoked by an EventBridge schedule. The event is validated strictly (this Lambda
is its own trust boundary): anything but a scheduled event gets a typed error
and nothing is read or changed. The refund's adapters are reused as they are;
only the database user differs (``cadencia_agente_conciliacao``).
"""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cadencia_shared.observability import logger_for
from emitir_reembolso.wiring import refund_service

from .books import BooksAudit
from .debits import HttpDebitListing
from .erp_books import ErpBooks
from .logic import Reconciler
from .settings import ReconcilerSettings

SERVICE = "conciliar_reembolsos"
logger = logger_for(SERVICE)


class ScheduledEvent(BaseModel):
    """What an EventBridge schedule sends (only the fields this Lambda trusts)."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)

    source: Literal["aws.events"]
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")


def scheduled_event(now_iso: str = "1970-01-01T00:00:00Z") -> dict[str, Any]:
    """The event a schedule delivers (for the local one-pass command and tests)."""
    return {"version": "0", "source": "aws.events", "detail-type": "Scheduled Event", "time": now_iso,
            "detail": {}, "resources": []}


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        if not isinstance(event, dict):
            raise TypeError("event is not a JSON object")
        ScheduledEvent.model_validate(event)
    except (ValidationError, TypeError) as err:
        logger.info("invalid event", extra={"erro": type(err).__name__})
        return {"ok": False, "erro": {"codigo": "entrada_invalida",
                                      "mensagem": "Evento inválido: esperado um evento agendado do EventBridge."}}
    settings = ReconcilerSettings.from_env()
    report = build(settings).run_pass(progress=lambda line: logger.info(line))
    logger.info("reconciliation pass", extra=report.summary())
    books = build_audit(settings).run(progress=lambda line: logger.info(line))
    logger.info("books audit", extra=books.summary())
    return {"ok": True, "resultado": report.summary(), "auditoria": books.summary()}


def build_audit(settings: ReconcilerSettings) -> BooksAudit:
    """The books' audit with the refund's adapters, the reconciler's DB user and,
    when the gateway lists its debits, its listing."""
    service = refund_service(settings)
    listing = None
    if settings.run.gateway_lists_debits == "true":
        listing = HttpDebitListing(settings.gateway.url, settings.gateway.timeout_s, service.read_gateway_token)
    return BooksAudit(service.ledger, service, ErpBooks(service.orders), listing,
                      window_s=int(settings.run.audit_window_h * 3600), max_keys=settings.run.audit_max_keys)


def build(settings: ReconcilerSettings) -> Reconciler:
    """The refund's own service and adapters, with the reconciler's DB user."""
    service = refund_service(settings)
    return Reconciler(service.ledger, service, batch=settings.run.batch)

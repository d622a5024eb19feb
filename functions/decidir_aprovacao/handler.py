"""Lambda entry point of ``cadencia-decidir-aprovacao`` (thin: parse, wire, run).

Its role may read and decide approval items and append audit records on the
ledger, and invoke the orchestrator asynchronously to resume the conversation —
nothing else (infra/contract.py). It never runs a tool: the orchestrator runs the
approved call, through its controls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from cadencia_shared import approval_policy
from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.aws import AwsSettings, client
from cadencia_shared.catalog import ORCHESTRATOR_FUNCTION_NAME
from cadencia_shared.handler import InvalidEvent, parse_event
from cadencia_shared.identity import is_api_event
from cadencia_shared.ledger import Ledger
from cadencia_shared.models import DecisionRequest, ExpireRequest, PendingListRequest, ShowRequest
from cadencia_shared.observability import logger_for
from cadencia_shared.settings import ApprovalSettings, EnvSettings, LedgerSettings

from . import api
from .logic import Request, handle

logger = logger_for("decidir_aprovacao")
_MODELS: dict[str, type[BaseModel]] = {"decidir": DecisionRequest, "listar": PendingListRequest,
                                       "mostrar": ShowRequest, "expirar": ExpireRequest}


class DecisionSettings(EnvSettings):
    # The orchestrator to resume; empty: do not resume (the local stack resumes in-process).
    resume_function: str = Field(ORCHESTRATOR_FUNCTION_NAME, alias="RESUME_FUNCTION")
    # The hash-chained audit table: decisions and refusals are appended there.
    audit_table: str | None = Field(None, alias="AUDIT_TABLE")


def parse(event: Any) -> Request:
    action = event.get("acao") if isinstance(event, dict) else None
    if not isinstance(action, str) or action not in _MODELS:
        raise InvalidEvent(["acao: deve ser 'listar', 'mostrar', 'decidir' ou 'expirar'"])
    # _MODELS maps each action to one of Request's models; mypy sees only type[BaseModel] there.
    return parse_event(event, _MODELS[action])  # type: ignore[return-value]


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    if is_api_event(event):  # through the HTTP API: the person is the authorizer's
        return _api(event, context)
    # A direct invocation: the break-glass path (only the role the contract names may
    # invoke this function directly); its decisions are audited as such (logic.handle).
    try:
        request = parse(event)
    except InvalidEvent as err:
        logger.info("invalid event", extra={"erros": err.problems})
        return {"ok": False, "erro": {"codigo": "entrada_invalida", "detalhes": err.problems}}
    aws, settings = AwsSettings.from_env(), DecisionSettings.from_env()
    ledger = _ledger(settings, aws)
    answer = handle(request, ledger, approvers=ApprovalSettings.from_env().approvers,
                    resume=_resume_port(settings, aws), policy=approval_policy.PolicySettings.from_env())
    logger.info("approval request handled", extra={"acao": request.acao, "ok": answer["ok"]})
    return answer


def _api(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    aws, settings = AwsSettings.from_env(), DecisionSettings.from_env()
    ledger = _ledger(settings, aws)
    app = api.build(ledger, resume=_resume_port(settings, aws), policy=approval_policy.PolicySettings.from_env())
    answer: dict[str, Any] = app.resolve(event, context)
    logger.info("api request handled", extra={"rota": event.get("routeKey"), "status": answer.get("statusCode")})
    return answer


def _ledger(settings: DecisionSettings, aws: AwsSettings) -> Ledger:
    """The ledger this function writes through: its audit on the conversation's hash chain,
    whose head is anchored in the ledger (audit_chain module doc: tail truncation)."""
    dynamodb = client("dynamodb", aws)
    ledger_table = LedgerSettings.from_env().table_name
    chain = AuditChain(settings.audit_table, dynamodb, anchor_table=ledger_table) if settings.audit_table else None
    return Ledger(ledger_table, dynamodb, audit_chain=chain)


def _resume_port(settings: DecisionSettings, aws: AwsSettings) -> Callable[[str], None]:
    def resume(approval: str) -> None:
        if not settings.resume_function:
            return
        # Asynchronous: Lambda retries a failed resume (a busy conversation raises
        # in the orchestrator) and the decision is already durable.
        client("lambda", aws).invoke(FunctionName=settings.resume_function, InvocationType="Event",
                                     Payload=json.dumps({"acao": "retomar_aprovacao", "aprovacaoId": approval}))
    return resume

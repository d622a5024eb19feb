"""Lambda entry point of the orchestrator (thin: parse, wire, run one turn)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.aws import client
from cadencia_shared.handler import InvalidEvent, parse_event
from cadencia_shared.ledger import Ledger
from cadencia_shared.observability import logger_for

from .events import ResumeRequest, TurnRequest
from .invokers import ToolInvoker
from .loop import Orchestrator
from .model import Deadline, build_sdk, model_client
from .settings import ModelProvider, OrchestratorSettings

logger = logger_for("orquestrador")


def _invoker(settings: OrchestratorSettings) -> ToolInvoker:
    if settings.tool_invoker == "aws":
        from .invokers.aws import INVOKE_CONFIG, LambdaInvoker

        return LambdaInvoker(client("lambda", settings.aws, config=INVOKE_CONFIG), settings.tool_functions)
    # Local mode only: imports the tool packages (never in AWS).
    import os

    from .invokers.local import InProcessInvoker

    with open(os.environ["LOCAL_TOOL_ENVIRONMENTS"], encoding="utf-8") as fh:
        return InProcessInvoker(json.load(fh))


def _api_key(settings: OrchestratorSettings) -> str | None:
    if settings.provider is not ModelProvider.ANTHROPIC or not settings.api_key_secret_name:
        return None  # Bedrock uses IAM; without a secret name the SDK reads ANTHROPIC_API_KEY
    # Deferred (~0.1 s of imports): only the Anthropic API with a key in Secrets Manager needs it.
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    secrets = SecretsProvider(boto3_client=client("secretsmanager", settings.aws))
    return secrets.get(settings.api_key_secret_name, max_age=300)


_built: dict[str, Orchestrator] = {}


def orchestrator(settings: OrchestratorSettings) -> Orchestrator:
    """Built once per execution environment (and configuration): clients, the key, the invoker."""
    key = settings.model_dump_json()
    if key not in _built:
        _built[key] = _build(settings)
    return _built[key]


def reset() -> None:
    _built.clear()


def chained_ledger(settings: OrchestratorSettings) -> Ledger:
    """The ledger every writer of this function uses (the turn and the queue consumer's
    sender alike): with ``AUDIT_TABLE`` its audit records go on the hash chain, whose
    head is anchored in the ledger (audit_chain module doc: tail truncation). Two
    builders were one too many: one of them wrote outside the chain."""
    dynamodb = client("dynamodb", settings.aws)
    chain = (AuditChain(settings.audit_table, dynamodb, anchor_table=settings.ledger.table_name)
             if settings.audit_table else None)
    return Ledger(settings.ledger.table_name, dynamodb, audit_chain=chain)


def _build(settings: OrchestratorSettings) -> Orchestrator:
    return Orchestrator(
        settings=settings,
        ledger=chained_ledger(settings),
        model=model_client(settings, build_sdk(settings, api_key=_api_key(settings))),
        invoker=_invoker(settings),
        logger=logger,
    )


def _resume(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        request = parse_event(event, ResumeRequest)
    except InvalidEvent as err:
        return {"status": "erro", "motivo": "entrada_invalida", "erros": err.problems, "resposta": None}
    from .resume import Resumer  # only resumes pay for it

    done = Resumer.of(orchestrator(OrchestratorSettings.from_env())).resume(
        request.aprovacaoId, Deadline(context.get_remaining_time_in_millis))
    logger.info("approval resumed", extra={"motivo": done.reason, "status": done.status})
    return done.to_wire()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    if isinstance(event, dict) and "acao" in event:
        return _resume(event, context)
    try:
        request = parse_event(event, TurnRequest)
    except InvalidEvent as err:
        # Small whatever the event (problems are capped, never the input itself).
        logger.info("invalid inbound event", extra={"erros": err.problems})
        return {"status": "erro", "motivo": "entrada_invalida", "erros": err.problems, "resposta": None}
    logger.append_keys(conversaId=request.conversaId, mensagemId=request.mensagemId)
    turn = orchestrator(OrchestratorSettings.from_env())
    reply = turn.handle(request, Deadline(context.get_remaining_time_in_millis))
    logger.info("turn finished", extra={"motivo": reply.motivo, "status": reply.status})
    return reply.model_dump(mode="json")

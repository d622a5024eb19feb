"""Lambda entry point of ``cadencia-resposta-atendente`` (thin: parse, wire, run).

Behind the HTTP API (``POST /conversas/{conversaId}/respostas``, a JWT authorizer in
front) the attendant is the authorizer's verified person (``human_reply_api``); a direct
invocation is the break-glass path, audited as such. Its
role may read and write the ledger's conversation, inbound, outbox and address items,
append to the audit chain and read the access token — nothing else (infra/contract.py).
It never calls the model nor a tool, so its asset carries neither.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field

from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.aws import AwsSettings, client
from cadencia_shared.handler import strict_handler
from cadencia_shared.identity import VIA_BREAK_GLASS, is_api_event
from cadencia_shared.ledger import Ledger
from cadencia_shared.observability import logger_for
from cadencia_shared.settings import EnvSettings, LedgerSettings
from canal_whatsapp.contacts import ChannelContacts
from canal_whatsapp.delivery import Sender
from canal_whatsapp.outbox import Outbox
from canal_whatsapp.settings import SenderSettings

from . import human_reply_api
from .human_reply import HumanReplies, HumanReplyRefused, HumanReplyRequest

logger = logger_for("resposta_atendente")


class HumanReplySettings(EnvSettings):
    # The hash-chained audit table: a person's reply is appended there.
    audit_table: str | None = Field(None, alias="AUDIT_TABLE")


_built: dict[str, HumanReplies] = {}


def replies() -> HumanReplies:
    """Built once per execution environment (and configuration)."""
    aws, ledger_cfg = AwsSettings.from_env(), LedgerSettings.from_env()
    settings, channel = HumanReplySettings.from_env(), SenderSettings.from_env()
    key = "".join(s.model_dump_json() for s in (aws, ledger_cfg, settings, channel))
    if key not in _built:
        dynamodb = client("dynamodb", aws)
        chain = (AuditChain(settings.audit_table, dynamodb, anchor_table=ledger_cfg.table_name)
                 if settings.audit_table else None)
        ledger = Ledger(ledger_cfg.table_name, dynamodb, audit_chain=chain)
        _built[key] = HumanReplies(ledger=ledger, contacts=ChannelContacts(ledger),
                                   sender=Sender.configured(Outbox(ledger), channel, client("secretsmanager", aws)))
    return _built[key]


def reset() -> None:
    _built.clear()


def _invalid(problems: list[str]) -> dict[str, Any]:
    return {"ok": False, "erro": {"codigo": "entrada_invalida", "detalhes": problems}}


def _refused(refused: HumanReplyRefused) -> dict[str, Any]:
    logger.info("reply refused", extra={"codigo": refused.code})
    return {"ok": False, "erro": {"codigo": refused.code, "mensagem": refused.message}}


def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    if is_api_event(event):  # through the HTTP API: the attendant is the authorizer's
        return human_reply_api.handle(event, context, replies, logger)
    # A direct invocation: the break-glass path (only the role the contract names may
    # invoke this function directly), audited as such.
    return _direct(event, context)


@strict_handler(model=HumanReplyRequest, logger=logger, invalid=_invalid, refusal=HumanReplyRefused,
                refused=_refused)
def _direct(request: HumanReplyRequest, context: LambdaContext) -> dict[str, Any]:
    outcome = replies().reply(request, time_left_s=lambda: context.get_remaining_time_in_millis() / 1000,
                              author={"via": VIA_BREAK_GLASS})
    # The text and the recipient are never logged: the reply id and the outcome are enough.
    logger.info("reply handled", extra={"respostaId": outcome.reply_id, "envio": outcome.delivery,
                                        "repetida": outcome.repeated})
    return outcome.as_answer()

"""The orchestrator's edge: the inbound customer message and the reply."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

from cadencia_shared.models import ConversationId, CustomerId


class TurnRequest(BaseModel):
    """One customer message. ``mensagemId`` is the channel's id of the message
    (WhatsApp's ``wamid``): a redelivery carries the same id and is answered once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conversaId: ConversationId
    clienteId: CustomerId
    mensagemId: ConversationId
    mensagem: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)]


TurnStatus = Literal["ativa", "aguardando_humano", "em_processamento", "erro"]


class TurnReply(BaseModel):
    model_config = ConfigDict(frozen=True)

    conversaId: str
    mensagemId: str
    resposta: str | None  # text to send to the customer (None: nothing to send now)
    status: TurnStatus
    motivo: str  # why the turn ended: resposta, teto, modelo_indisponivel, ...
    duplicada: bool = False

"""The orchestrator's edge: the inbound customer message and the reply."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from cadencia_shared.models import EDGE_CONFIG, ConversationId, CustomerId, CustomerMessage


class TurnRequest(BaseModel):
    """One customer message. ``mensagemId`` is the channel's id of the message
    (WhatsApp's ``wamid``): a redelivery carries the same id and is answered once."""

    model_config = EDGE_CONFIG

    conversaId: ConversationId
    clienteId: CustomerId
    mensagemId: ConversationId
    mensagem: CustomerMessage  # line breaks and emoji joiners allowed; bidi/control characters refused


TurnStatus = Literal["ativa", "aguardando_humano", "em_processamento", "erro"]


class TurnReply(BaseModel):
    model_config = ConfigDict(frozen=True)

    conversaId: str
    mensagemId: str
    resposta: str | None  # text to send to the customer (None: nothing to send now)
    status: TurnStatus
    motivo: str  # why the turn ended: resposta, teto, modelo_indisponivel, ...
    duplicada: bool = False

"""Typed fields shared by every tool's input model (the edge of each Lambda)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .ledger import ID_PATTERN

ConversationId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
OrderId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._\-]{1,64}$")]
CustomerId = Annotated[int, Field(gt=0, lt=2**63)]


class ToolRequest(BaseModel):
    """Every tool event carries the conversation and the customer, injected by the
    orchestrator from the inbound message: the model never chooses them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conversaId: ConversationId
    clienteId: CustomerId

"""The start-up every operator command shares (scripts/aprovar.py, atendente.py, operador.py,
auditoria.py, medir_disjuntor.py): find the running local stack or say how to start it, the
DynamoDB client of the chosen target, the ledger an operator command writes through (its audit
records are links of the conversation's hash chain, anchored in the ledger, as every deployed
writer's are — never ``auditoria#`` ledger items), and the strict check of a conversation id typed
on the command line (the same pattern the Lambdas enforce; the value is never echoed back).

Exit codes: 2 for an argument the strict edge refuses, 3 when the local stack is down (as
``scripts/local-stack status``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from pydantic import BaseModel, ValidationError

from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import Ledger
from cadencia_shared.models import EDGE_CONFIG, ConversationId

from .local_stack import stack
from .local_stack.aws import session_client

STACK_DOWN = "local stack is down (run: scripts/local-stack up)"
EXIT_INVALID_ARGUMENT = 2
EXIT_STACK_DOWN = 3


def running_stack() -> stack.StackState:
    """The running local stack; exits with how to start it when there is none."""
    state = stack.load()
    if state is None:
        print(STACK_DOWN, file=sys.stderr)
        raise SystemExit(EXIT_STACK_DOWN)
    return state


def dynamodb_client(local: bool) -> Any:
    """The running local stack's client with ``local``, else one with the caller's own AWS
    credentials (an operator's, never a Lambda role's)."""
    if not local:
        return boto3.session.Session().client("dynamodb")
    return session_client("dynamodb", running_stack().aws_endpoint)


def audit_table() -> str:
    """The hash chain's table: ``AUDIT_TABLE`` (as the stack gives every writer), else the
    stack's own name — the local stack provisions it under that name too."""
    return os.environ.get("AUDIT_TABLE") or AUDIT_TABLE


def chained_ledger(table_name: str, client: Any) -> Ledger:
    """The ledger an operator command writes through: its audit records go to the
    conversation's hash chain (heads anchored in ``table_name``), on both targets."""
    return Ledger(table_name, client, audit_chain=AuditChain(audit_table(), client, anchor_table=table_name))


@contextmanager
def stack_for_a_measurement() -> Iterator[stack.StackState]:
    """The running local stack when it is healthy, else one started for this command and
    stopped after it (a measurement needs no stack of its own otherwise)."""
    state = stack.load()
    started = state is None or not all(stack.healthy(state).values())
    if started:
        state = stack.up()
    try:
        yield state
    finally:
        if started:
            stack.down()


class _ConversationArgument(BaseModel):
    model_config = EDGE_CONFIG

    conversation_id: ConversationId | None = None


def conversation_argument(raw: str | None) -> str | None:
    """``--conversa`` checked like every edge; exits 2 with a fixed message when refused."""
    try:
        return _ConversationArgument(conversation_id=raw).conversation_id
    except ValidationError:
        print("conversa: identificador inválido", file=sys.stderr)
        raise SystemExit(EXIT_INVALID_ARGUMENT) from None

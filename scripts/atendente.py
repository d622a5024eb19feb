"""A person takes over handed-off conversations from a terminal (issue 10).

    python -m scripts.atendente listar
    python -m scripts.atendente mostrar <ref>
    python -m scripts.atendente responder <ref> --texto "Olá! Sou a Ana, vou cuidar do seu pedido."
    python -m scripts.atendente devolver <ref>

``listar`` reads the conversations waiting for a person (``aguardando_humano``) from
the ledger's sparse index; each is shown by a reference (``ref``: the first 12 hex
digits of the SHA-256 of its id), never by its id, which may be the customer's
phone number. ``mostrar`` prints the history masked (contact data by field and by
shape). ``responder`` stores the person's reply in the conversation (the model reads
it later; sending it through the channel is the channel's job, issue 12).
``devolver`` returns the conversation to the agent. Both write under the
conversation's lease and version fence, like a turn.

``--alvo local`` (default) uses the local stack; ``--alvo aws`` the deployed ledger
with the caller's own credentials (GetItem/UpdateItem on the ledger, Query on its
sparse index).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cadencia_shared.catalog import LEDGER_TABLE
from cadencia_shared.ledger import ConversationBusy, ConversationStatus, Ledger
from cadencia_shared.masking import mask_arguments, mask_free_text, mask_identifier
from orchestrator import history

from .operator_cli import dynamodb_client

console = Console()
LEASE_S = 30


def reference(conversa_id: str) -> str:
    return hashlib.sha256(conversa_id.encode()).hexdigest()[:12]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alvo", choices=("local", "aws"), default="local")
    sub = p.add_subparsers(dest="comando", required=True)
    sub.add_parser("listar")
    for name in ("mostrar", "devolver"):
        sub.add_parser(name).add_argument("ref")
    reply = sub.add_parser("responder")
    reply.add_argument("ref")
    reply.add_argument("--texto", required=True)
    return p.parse_args(argv)


def ledger_for(target: str) -> Ledger:
    return Ledger(LEDGER_TABLE, dynamodb_client(local=target == "local"))


def masked_history(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    lines = []
    for message in messages:
        content = message["content"] if isinstance(message["content"], list) else [
            {"type": "text", "text": message["content"]}]
        for block in content:
            kind = block.get("type")
            if kind == "text":
                lines.append((message["role"], mask_free_text(block["text"])))
            elif kind == "tool_use":
                lines.append(("ferramenta", f"{block['name']} {json.dumps(mask_arguments(block['input']))}"))
            elif kind == "tool_result":
                lines.append(("resultado", mask_free_text(str(block.get("content")))[:300]))
    return lines


def find(ledger: Ledger, ref: str) -> str:
    for conversa_id, _ in ledger.waiting_for_a_person():
        if reference(conversa_id) == ref:
            return conversa_id
    raise SystemExit(f"nenhuma conversa aguardando um atendente com a referência {ref}")


def take_over(ledger: Ledger, conversa_id: str, *, text: str | None, back_to_agent: bool) -> None:
    """One write under the conversation's lease (a live turn makes this wait)."""
    current = ledger.read_conversation(conversa_id)
    assert current is not None
    try:
        state = ledger.acquire_conversation(conversation_id=conversa_id, customer_id=current.customer_id, lease_s=LEASE_S)
    except ConversationBusy:
        raise SystemExit("a conversa está sendo processada agora; tente de novo em instantes") from None
    messages = history.append_assistant_text(state.messages, text) if text else state.messages
    status = ConversationStatus.ACTIVE if back_to_agent else state.status
    ledger.commit_conversation(state, messages=messages, status=status)
    ledger.append_audit(conversation_id=conversa_id, event="ATENDENTE_DEVOLVEU_AO_AGENTE" if back_to_agent
                        else "ATENDENTE_RESPONDEU", details={"caracteres": len(text or "")})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ledger = ledger_for(args.alvo)
    if args.comando == "listar":
        table = Table(title="conversas aguardando um atendente")
        for col in ("ref", "conversa", "desde"):
            table.add_column(col)
        for conversa_id, since in ledger.waiting_for_a_person():
            table.add_row(reference(conversa_id), mask_identifier(conversa_id), since)
        console.print(table)
        return 0
    conversa_id = find(ledger, args.ref)
    if args.comando == "mostrar":
        state = ledger.read_conversation(conversa_id)
        for role, text in masked_history(state.messages if state else []):
            console.print(f"[bold]{role}[/]: {escape(text)}", highlight=False)
        return 0
    take_over(ledger, conversa_id, text=getattr(args, "texto", None), back_to_agent=args.comando == "devolver")
    console.print("devolvida ao agente" if args.comando == "devolver" else "resposta registrada na conversa")
    return 0


if __name__ == "__main__":
    sys.exit(main())

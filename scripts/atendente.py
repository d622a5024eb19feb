"""A person takes over handed-off conversations from a terminal.

    scripts/atendente listar
    scripts/atendente mostrar <ref>
    scripts/atendente responder <ref> --texto "Olá! Sou a Ana, vou cuidar do seu pedido."
    scripts/atendente devolver <ref>

``listar`` reads the conversations waiting for a person (``aguardando_humano``) from
the ledger's sparse index; each is shown by a reference (``ref``: the first 12 hex
digits of the SHA-256 of its id), never by its id, which may be the customer's
phone number. ``mostrar`` prints the history masked (contact data by field and by
shape). ``responder`` hands the person's reply to ``cadencia-resposta-atendente``
(orchestrator/human_reply.py): written once in the conversation (the model reads it
later) and sent to the customer through the WhatsApp channel's outbox, the same path
as the agent's replies. Running the same ``responder`` again (after a crash or a
timeout) finishes that reply; it never sends a second copy. ``devolver`` returns the
conversation to the agent. Both write under the conversation's lease and version
fence, like a turn.

``--alvo local`` (default) uses the local stack: the reply's Lambda runs in-process
and sends through the channel that ``scripts/conversa.py`` runs. ``--alvo aws`` uses
the deployed ledger with the caller's own credentials (GetItem/UpdateItem on the
ledger, Query on its sparse index; ``devolver``'s record is a link of the conversation's
hash chain, as every writer's: PutItem/Query on the audit table) and invokes
``cadencia-resposta-atendente`` (lambda:InvokeFunction on it): the person never holds the
Cloud API's token.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cadencia_shared.catalog import LEDGER_TABLE
from cadencia_shared.ledger import ConversationBusy, ConversationStatus, Ledger
from cadencia_shared.masking import mask_arguments, mask_free_text, mask_identifier
from canal_whatsapp.contacts import ChannelContacts
from canal_whatsapp.outbox import Outbox
from canal_whatsapp.settings import HUMAN_REPLY_FUNCTION_NAME
from orchestrator.human_reply import reply_id
from orchestrator.invokers.local import LocalContext, function_environment

from .local_stack import stack
from .local_stack.whatsapp_channel import published_sender_environment
from .operator_cli import audit_table, chained_ledger, dynamodb_client

console = Console()
LEASE_S = 30
REPLY_TIMEOUT_S = 30  # the reply Lambda's timeout: room for the bounded send retries

# What the person is told about the reply, by the outbox's outcome (and whether the
# command's exit status says "done": 0, or "look at this": 2).
SEND_OUTCOMES = {
    "enviado": (0, "resposta enviada ao cliente pelo WhatsApp"),
    "sem_canal": (0, "resposta registrada na conversa; esta conversa não tem endereço de WhatsApp, nada foi enviado"),
    "fora_da_janela": (2, "NÃO enviada: passaram-se mais de 24 horas da última mensagem do cliente (regra do "
                          "WhatsApp); a resposta ficou registrada na conversa — contate o cliente por outro canal"),
    "falhou": (2, "NÃO enviada: o WhatsApp recusou ou falhou em todas as tentativas (alarme disparado); a resposta "
                  "ficou registrada na conversa"),
    "desconhecido": (2, "resultado desconhecido: o envio saiu e o WhatsApp não respondeu; pode ter sido entregue. "
                        "Não será reenviada (alarme disparado)"),
    "envio_pendente": (2, "registrada, ainda não enviada (faltou tempo): rode o mesmo comando de novo para enviar"),
    "envio_em_andamento": (2, "registrada; o envio está em andamento em outra execução: rode o mesmo comando de "
                              "novo para ver o resultado"),
}


def reference(conversation_id: str) -> str:
    return hashlib.sha256(conversation_id.encode()).hexdigest()[:12]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alvo", dest="target", choices=("local", "aws"), default="local")
    sub = p.add_subparsers(dest="comando", required=True)
    sub.add_parser("listar")
    for name in ("mostrar", "devolver"):
        sub.add_parser(name).add_argument("ref")
    reply = sub.add_parser("responder")
    reply.add_argument("ref")
    reply.add_argument("--texto", dest="text", metavar="TEXTO", required=True)
    return p.parse_args(argv)


def ledger_for(target: str) -> Ledger:
    """Chained on both targets: ``devolver``'s record is a link of the conversation's chain."""
    return chained_ledger(LEDGER_TABLE, dynamodb_client(local=target == "local"))


def reply_positions(messages: list[dict[str, Any]], customer_messages: int) -> list[int]:
    """For each history entry, the position a person's reply written there had
    (``human_reply.reply_position``): the conversation's customer-message counter less the
    customer texts after it; for a conversation stored before the counter, the ``user``
    entries up to it. A position it cannot know (a cut or a resume in between) shows no status."""
    if not customer_messages:
        return [sum(1 for m in messages[: i + 1] if m["role"] == "user") for i in range(len(messages))]
    texts = [m["role"] == "user" and (isinstance(m["content"], str) or any(
        isinstance(b, dict) and b.get("type") == "text" for b in m["content"])) for m in messages]
    return [customer_messages - sum(texts[i + 1:]) for i in range(len(messages))]


def masked_history(messages: list[dict[str, Any]],
                   person_reply_status: Callable[[int, str], str | None] = lambda _n, _t: None,
                   positions: list[int] | None = None) -> list[tuple[str, str]]:
    """``person_reply_status``: for an agent-turn text and its reply position
    (``reply_positions``), the send status of the person's reply with that text (None: not a
    person's reply), so a reply written but not sent shows."""
    lines = []
    positions = positions if positions is not None else reply_positions(messages, 0)
    for index, message in enumerate(messages):
        customer_side = positions[index]
        content = message["content"] if isinstance(message["content"], list) else [
            {"type": "text", "text": message["content"]}]
        for block in content:
            kind = block.get("type")
            status = (person_reply_status(customer_side, block["text"])
                      if kind == "text" and message["role"] == "assistant" else None)
            if status is not None:
                lines.append(("atendente", f"{mask_free_text(block['text'])} [envio: {status}]"))
            elif kind == "text":
                lines.append((message["role"], mask_free_text(block["text"])))
            elif kind == "tool_use":
                lines.append(("ferramenta", f"{block['name']} {json.dumps(mask_arguments(block['input']))}"))
            elif kind == "tool_result":
                lines.append(("resultado", mask_free_text(str(block.get("content")))[:300]))
    return lines


def find(ledger: Ledger, ref: str) -> str:
    for conversation_id, _ in ledger.waiting_for_a_person():
        if reference(conversation_id) == ref:
            return conversation_id
    raise SystemExit(f"nenhuma conversa aguardando um atendente com a referência {ref}")


def give_back(ledger: Ledger, conversation_id: str) -> None:
    """One write under the conversation's lease (a live turn makes this wait)."""
    current = ledger.read_conversation(conversation_id)
    assert current is not None
    try:
        state = ledger.acquire_conversation(conversation_id=conversation_id, customer_id=current.customer_id,
                                            lease_s=LEASE_S)
    except ConversationBusy:
        raise SystemExit("a conversa está sendo processada agora; tente de novo em instantes") from None
    ledger.commit_conversation(state, messages=state.messages, status=ConversationStatus.ACTIVE)
    ledger.append_audit(conversation_id=conversation_id, event="ATENDENTE_DEVOLVEU_AO_AGENTE", details={})


def send_reply_local(ledger: Ledger, event: dict[str, Any]) -> dict[str, Any]:
    """The reply Lambda's handler, in-process, with the local channel's sender settings."""
    state = stack.load()
    assert state is not None  # ledger_for checked it
    channel = published_sender_environment(Path(state.directory))
    if channel is None and ChannelContacts(ledger).find(event["conversaId"]) is not None:
        raise SystemExit("esta conversa é do WhatsApp e o canal local não está rodando (abra scripts/conversa.py "
                         "em outro terminal): nada foi gravado")
    from orchestrator import human_reply_handler

    # AUDIT_TABLE as the stack gives this Lambda (infra.controls.add_audit_table): the reply's link is on the chain.
    env = {**state.aws_environment(), "LEDGER_TABLE": state.ledger_table, "AUDIT_TABLE": audit_table(),
           "POWERTOOLS_LOG_LEVEL": "WARNING", **(channel or {})}
    with function_environment(env):
        human_reply_handler.reset()
        try:
            return human_reply_handler.lambda_handler(event, LocalContext(HUMAN_REPLY_FUNCTION_NAME,
                                                                          timeout_s=REPLY_TIMEOUT_S))
        finally:
            human_reply_handler.reset()


def send_reply_aws(event: dict[str, Any]) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    # No automatic retry of the invocation: running the command again is the retry,
    # and it finishes the same reply (its id is derived from the conversation and text).
    lam = boto3.client("lambda", config=Config(read_timeout=REPLY_TIMEOUT_S + 5, retries={"max_attempts": 1}))
    resp = lam.invoke(FunctionName=HUMAN_REPLY_FUNCTION_NAME, Payload=json.dumps(event).encode())
    return json.loads(resp["Payload"].read())


def show_reply(answer: dict[str, Any]) -> int:
    if not answer.get("ok"):
        error = answer.get("erro") or {}
        detail = error.get("mensagem") or "; ".join(error.get("detalhes") or [])
        console.print(f"[red]recusada ({escape(str(error.get('codigo')))}):[/] {escape(str(detail))}")
        return 1
    code, sentence = SEND_OUTCOMES.get(answer["envio"], (2, f"estado do envio: {answer['envio']}"))
    if answer.get("repetida"):
        sentence = "esta mesma resposta já tinha sido registrada (nada novo na conversa); " + sentence
    console.print(sentence if code == 0 else f"[yellow]{sentence}[/]")
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ledger = ledger_for(args.target)
    if args.comando == "listar":
        table = Table(title="conversas aguardando um atendente")
        for col in ("ref", "conversa", "desde"):
            table.add_column(col)
        for conversation_id, since in ledger.waiting_for_a_person():
            table.add_row(reference(conversation_id), mask_identifier(conversation_id), since)
        console.print(table)
        return 0
    conversation_id = find(ledger, args.ref)
    if args.comando == "mostrar":
        state = ledger.read_conversation(conversation_id)
        outbox = Outbox(ledger)

        def person_reply_status(customer_side: int, text: str) -> str | None:
            status = outbox.status(reply_id(conversation_id, customer_side, text))
            return None if status is None else status.value

        messages = state.messages if state else []
        positions = reply_positions(messages, state.customer_messages if state else 0)
        for role, text in masked_history(messages, person_reply_status, positions):
            console.print(f"[bold]{role}[/]: {escape(text)}", highlight=False)
        return 0
    if args.comando == "devolver":
        give_back(ledger, conversation_id)
        console.print("devolvida ao agente")
        return 0
    event = {"conversaId": conversation_id, "texto": args.text}
    return show_reply(send_reply_aws(event) if args.target == "aws" else send_reply_local(ledger, event))


if __name__ == "__main__":
    sys.exit(main())

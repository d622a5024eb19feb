#!/usr/bin/env -S sh -c 'r="$(dirname "$(readlink -f "$0")")/.."; [ -x "$r/.venv/bin/python" ] || bash "$r/scripts/setup.sh" >&2 || exit 1; exec "$r/.venv/bin/python" "$0" "$@"'
"""conversa.py — talk to the agent as a WhatsApp customer, on the local stack.

    scripts/conversa.py [--numero 5511987654321] [--modelo roteirizado|<Claude model id>]

What you type goes the whole way a customer's message goes: a Cloud API webhook
signed with the (test) App Secret → the ingress (signature, wa_id → customer in
the ERP) → SQS FIFO → the orchestrator's queue consumer (the real loop, gates,
ledger and tool Lambdas) → ``POST /{phone-number-id}/messages`` on the fake Cloud
API, whose recorded message is what you see. The scripted model answers by
default; with ANTHROPIC_API_KEY set (or --modelo <id>) Claude answers.

Commands: /numero (switch customer), /imagem (send a photo), /repetir (Meta
redelivers your last message), /aguardar (wait for a message you did not ask for:
a person's reply), /sair.

A person answers a handed-off conversation from another terminal while this one
runs (write "quero falar com um atendente" here; the scripted model asks for a person,
the conversation waits for one): ``scripts/atendente listar``, then
``responder <ref> --texto "…"`` sends through this chat's channel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "functions"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from scripts.harness.scripted_model import ScriptedModelServer  # noqa: E402
from scripts.local_stack import stack  # noqa: E402
from scripts.local_stack.whatsapp_channel import LocalChannel  # noqa: E402
from scripts.local_stack.whatsapp_fake import media_message, notification, text_message  # noqa: E402
from scripts.local_stack.whatsapp_model import ChatPolicy  # noqa: E402

DEMO_NUMBERS = {  # sql/demo.sql (canais_whatsapp), plus one that is bound to nobody
    "5511987654321": "Ana Souza (cliente 1001; pedidos 4821, 4822)",
    "5521998765432": "Bruno Lima (cliente 1002; pedido 5100)",
    "5541991234567": "Carla Mendes (cliente 1003; pedido 6200)",
    "5561900001111": "número sem cadastro",
}
console = Console()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--numero", dest="number", choices=sorted(DEMO_NUMBERS),
                   help="the customer's WhatsApp number (wa_id)")
    p.add_argument("--modelo", dest="model", metavar="MODELO", default=None,
                   help="'roteirizado' (the scripted model; default without ANTHROPIC_API_KEY) or a Claude model id")
    p.add_argument("--espera", dest="wait_s", metavar="ESPERA", type=float, default=90,
                   help="seconds to wait for each reply")
    return p.parse_args(argv)


def model_env(args: argparse.Namespace, exits: ExitStack) -> tuple[dict[str, str], str]:
    use_claude = args.model not in (None, "roteirizado") or (args.model is None and os.environ.get("ANTHROPIC_API_KEY"))
    if use_claude:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise SystemExit("a Claude model needs ANTHROPIC_API_KEY in the environment")
        env = {"MODEL_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": os.environ["ANTHROPIC_API_KEY"]}
        if args.model:
            env["MODEL_ID"] = args.model
        return env, f"Claude ({args.model or 'modelo padrão do orquestrador'})"
    server = exits.enter_context(ScriptedModelServer())
    server.activate(ChatPolicy())
    label = ("modelo roteirizado: 'pedido 4821', 'quero reembolso do pedido 4821', 'já caiu o reembolso?', "
             "'muda meu email para …', 'quero falar com um atendente'; o resto ecoa")
    return ({"MODEL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": server.base_url, "MODEL_ID": "cadencia-roteirizado",
             "ANTHROPIC_API_KEY": "local-scripted-model"}, label)


def choose_number(current: str | None) -> str:
    table = Table(title="Números de demonstração")
    for col in ("#", "wa_id", "quem"):
        table.add_column(col)
    numbers = list(DEMO_NUMBERS)
    for i, number in enumerate(numbers, 1):
        table.add_row(str(i), number, DEMO_NUMBERS[number])
    console.print(table)
    while True:
        answer = console.input(f"Escolha 1-{len(numbers)}{f' [{numbers.index(current) + 1}]' if current else ''}: ")
        if not answer.strip() and current:
            return current
        if answer.strip().isdigit() and 1 <= int(answer) <= len(numbers):
            return numbers[int(answer) - 1]


def wait_reply(channel: LocalChannel, number: str, seen: int, timeout_s: float) -> list[str]:
    with console.status("a Cadência está digitando…"):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            sent = channel.api.sent_to(number)
            if len(sent) > seen:
                time.sleep(0.3)  # a second reply (e.g. to a batch) usually follows right away
                return [m.body for m in channel.api.sent_to(number)[seen:]]
            time.sleep(0.1)
    return []


def show_model_errors(channel: LocalChannel, read: dict[Path, int]) -> None:
    """The cause behind the customer's apology: the orchestrator's "model unavailable" log lines
    (consumer logs; ``read`` keeps how far each was read)."""
    for path in sorted(Path(channel.dir).glob("consumer-*.log")):
        data = path.read_bytes()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        for line in data[read.get(path, 0):end].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("message") == "model unavailable":
                console.print(f"[red]erro do modelo: {escape(str(entry.get('erro') or '?'))}[/] "
                              f"[dim](classe {escape(str(entry.get('classe')))}, {entry.get('tentativas')} "
                              "tentativa(s); a cliente recebeu o pedido de desculpas)[/]")
        read[path] = max(read.get(path, 0), end)


def chat(channel: LocalChannel, number: str, timeout_s: float) -> None:
    last: dict | None = None
    errors_read: dict[Path, int] = {}
    shown = len(channel.api.sent_to(number))  # messages to this number already on screen
    while True:
        shown = show_new(channel, number, shown)  # e.g. a person's reply that arrived meanwhile
        try:
            text = console.input(f"[bold green]você ({number})>[/] ")
        except EOFError:
            return
        command = text.strip().lower()
        if command in ("/sair", "/exit", "/quit"):
            return
        if command == "/numero":
            number = choose_number(number)
            shown = len(channel.api.sent_to(number))
            continue
        if command == "/aguardar":
            shown += show_replies(wait_reply(channel, number, shown, timeout_s), command)
            continue
        if not text.strip() and command != "/repetir":
            continue
        if command == "/repetir" and last is None:
            console.print("[yellow]nada para repetir[/]")
            continue
        message = (last if command == "/repetir" else
                   media_message(number) if command == "/imagem" else text_message(number, text))
        last = message
        status = channel.webhook.post(notification([message]))
        if status != 200:
            console.print(f"[red]o webhook respondeu {status}[/]")
            continue
        shown += show_replies(wait_reply(channel, number, shown, timeout_s if command != "/repetir" else 5), command)
        show_model_errors(channel, errors_read)


def show_new(channel: LocalChannel, number: str, shown: int) -> int:
    for message in channel.api.sent_to(number)[shown:]:
        console.print(f"[bold magenta]Cadência>[/] {message.body}")
        shown += 1
    return shown


def show_replies(replies: list[str], command: str) -> int:
    if not replies:
        console.print("[dim](nenhuma resposta nova" + (": redelivery absorvida)" if command == "/repetir" else ")"))
    for reply in replies:
        console.print(f"[bold magenta]Cadência>[/] {reply}")
    return len(replies)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with ExitStack() as exits:
        state = stack.load()
        if state is None or not all(stack.healthy(state).values()):
            with console.status("subindo a stack local…"):
                state = stack.up()
            exits.callback(stack.down)
        env, label = model_env(args, exits)
        with console.status("subindo o canal (webhook, fila, orquestrador)…"):
            # Published: scripts/atendente.py (another terminal) sends a person's reply through it.
            channel = exits.enter_context(LocalChannel(state, model_env=env, consumers=1, publish=True))
        console.print(f"canal pronto: webhook {channel.ingress_url} · {label}")
        number = args.number or choose_number(None)
        console.print("Comandos: /numero, /imagem, /repetir, /aguardar, /sair")
        chat(channel, number, args.wait_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())

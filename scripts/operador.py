"""Operator commands on a conversation.

    scripts/operador cancelar --conversa ID [--local]

``cancelar`` flags the conversation: the automatic turn in flight stops before its
next tool call, or at its commit (whichever comes first), with a hand-off; with no
turn in flight, the next one does. The flag is consumed by the turn it cancels
(``Ledger.request_cancellation``). ``--local``: the running local stack's ledger;
otherwise the table of ``LEDGER_TABLE`` with the caller's own AWS credentials
(an operator's, not any Lambda role's).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Runnable as a file too (``.venv/bin/python scripts/operador.py ...``), like provocar_laco.py.
ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "functions"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

from cadencia_shared.ledger import Ledger  # noqa: E402
from cadencia_shared.settings import LedgerSettings  # noqa: E402
from orchestrator import approval_lifecycle  # noqa: E402
from scripts.operator_cli import chained_ledger, conversation_argument, dynamodb_client  # noqa: E402


def cancel(ledger: Ledger, conversation_id: str) -> int:
    if not ledger.request_cancellation(conversation_id):
        print(f"conversa {conversation_id}: não encontrada", file=sys.stderr)
        return 2
    # The conversation's open approvals are void at once (the operators' list drops them;
    # the turn that consumes the cancellation voids again whatever a racing turn asked).
    state = ledger.read_conversation(conversation_id)
    voided = approval_lifecycle.void_open_approvals(ledger, conversation_id, state.messages if state else [])
    print(f"conversa {conversation_id}: cancelamento registrado (o turno em andamento, ou o próximo, é interrompido)"
          + (f"; {len(voided)} aprovação(ões) anulada(s)" if voided else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/operador", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cancel_command = commands.add_parser("cancelar", help="stop the conversation's automatic turn")
    cancel_command.add_argument("--conversa", dest="conversation", metavar="CONVERSA", required=True)
    cancel_command.add_argument("--local", action="store_true", help="the running local stack's ledger")
    args = parser.parse_args(argv)
    conversation_id = conversation_argument(args.conversation)
    # LEDGER_TABLE wins (a test's private ledger on the same server), else the stack's name.
    return cancel(chained_ledger(LedgerSettings.from_env().table_name, dynamodb_client(args.local)), conversation_id)


if __name__ == "__main__":
    sys.exit(main())

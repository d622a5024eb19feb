"""One refund end to end through the tool handlers, on the local stack.

The first call debits the gateway; the repeat (the looping model's "já caiu?")
is blocked by the idempotency claim without reading the secret. Debits are
counted at the gateway server, never inferred from the handler's answer.
"""

from __future__ import annotations

import json
import sys
import urllib.request
import uuid

from rich.console import Console
from rich.table import Table

from cadencia_shared.catalog import EMITIR_REEMBOLSO
from cadencia_shared.ledger import Ledger
from orchestrator import sealing
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline

from .local_stack import postgres, stack
from .local_stack.aws import session_client
from .local_stack.emf import capture_emf

console = Console()


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def main() -> int:
    with console.status("bringing the local stack up…"):
        state = stack.up(lambda m: console.print(f"[cyan]›[/] {m}"))
    # Fresh demo rows (the upsert resets the refund columns) and a new conversation,
    # so the demo shows the same thing every time it runs.
    postgres.apply_sql(state.postgres, ("demo.sql",))
    invoker = InProcessInvoker(state.function_environments())
    ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
    event = {"conversaId": f"conv-demo-{uuid.uuid4().hex[:8]}", "clienteId": 1001, "pedidoId": "4821", "valor": 189.90}
    table = Table(title="emitir_reembolso, same conversation and order, called twice")
    for col in ("call", "resultado", "transacao", "gateway debits so far"):
        table.add_column(col)
    ok = True
    with capture_emf(state.metrics_file) as metrics:
        for n in (1, 2):
            # Sealed as a turn seals it (docs/seal.md): the tool's edge refuses an unsealed call.
            with sealing.turn(ledger, conversation_id=event["conversaId"], customer_id=1001,
                              deadline=Deadline.after(60), threshold=None):
                result = invoker.invoke(EMITIR_REEMBOLSO, event)
            payload = result.payload or {}
            debits = _get(f"{state.gateway_url}/_admin/debitos")
            table.add_row(str(n), str(payload.get("resultado") or payload.get("erro")),
                          str((payload.get("dados") or {}).get("transacao")), str(len(debits)))
            expected = "executado" if n == 1 else "bloqueado_por_idempotencia"
            ok &= payload.get("resultado") == expected
    console.print(table)
    stats = _get(f"{state.gateway_url}/_admin/estatisticas")
    console.print(f"gateway: {stats['reembolso']} refund request(s), {stats['debitos']} real debit(s)")
    for (name, dims), value in sorted(metrics.totals().items()):
        console.print(f"metric {name} {dict(dims)} = {value:g}")
    console.print("[green]first call debited, repeat blocked[/]" if ok else "[red]unexpected outcome[/]")
    debits = _get(f"{state.gateway_url}/_admin/debitos")
    new_debits = len([d for d in debits if d["idempotencyKey"].startswith(event["conversaId"])])
    console.print(f"real debits for {event['conversaId']}: {new_debits}")
    return 0 if ok and new_debits == 1 else 1


if __name__ == "__main__":
    sys.exit(main())

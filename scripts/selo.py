"""SEAL attacked on the local stack: each tool handler called directly with forged events,
as a principal allowed ``lambda:InvokeFunction`` could send them (docs/seal.md).

Eleven forged calls — no envelope, another session's envelope, a replay, arguments changed
after signing, another customer's profile and order, a refund above the approval limit with
no approval or with one that binds nothing, an expired and a closed session, a conversation
that never existed — each must be refused at the edge with its code; the gateway's debits
and the database (the ERP's rows, the ledger's items but SEAL's own) must not change. Then
one legitimate sealed call must succeed.

    python -m scripts.selo   (the local stack must be up)

Prints one row per forged call; exits 1 when any had an effect or was not refused as expected.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from rich.console import Console

from cadencia_shared.catalog import ATUALIZAR_CADASTRO, CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO, ToolSpec
from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore, TurnSession
from cadencia_shared.seal import seal
from orchestrator.invokers.local import InProcessInvoker

from .local_stack import postgres
from .local_stack.aws import session_client
from .local_stack.gateway_admin import GatewayAdmin
from .verdicts import STACK_DOWN_EXIT, checks_table, running_stack, verdict

CUSTOMER, OTHER_CUSTOMER = 1001, 1002  # Ana and Bruno (sql/demo.sql)
ORDER, OTHER_ORDER = "4821", "5100"  # Ana's and Bruno's orders
LIMIT = SessionLimits()  # the catalog's default: R$ 500 without a person's approval
SEAL_PREFIXES = ("sessao#", "jti#")


@dataclass(frozen=True)
class Row:
    case: str
    expected: int
    code: int | None  # the edge's refusal code (None: not refused)

    @property
    def ok(self) -> bool:
        return self.code == self.expected


@dataclass(frozen=True)
class Result:
    rows: list[Row]
    debits: int  # new gateway debits during the forged calls
    db_changes: int  # ERP tables whose rows changed + business ledger items written
    legitimate: bool  # the sealed control call succeeded

    @property
    def ok(self) -> bool:
        return self.legitimate and self.debits == 0 and self.db_changes == 0 and all(r.ok for r in self.rows)


def _session(ledger: Ledger, conv: str, customer: int = CUSTOMER, expires_at_ms: int | None = None) -> TurnSession:
    return SessionStore(ledger.table).open_session(
        conversation_id=conv, customer_id=customer, tools={EMITIR_REEMBOLSO.name, CONSULTAR_STATUS_PEDIDO.name,
                                                           ATUALIZAR_CADASTRO.name},
        limits=LIMIT, expires_at_ms=ledger.now_ms() + 600_000 if expires_at_ms is None else expires_at_ms)


def _sealed(ledger: Ledger, spec: ToolSpec, event: dict[str, Any], **kw: Any) -> dict[str, Any]:
    session = _session(ledger, event["conversaId"], event["clienteId"])
    return seal(event, tool=spec.name, session=session, now_ms=ledger.now_ms(), **kw)


def forged_calls(ledger: Ledger, used: dict[str, Any]) -> list[tuple[str, ToolSpec, dict[str, Any], int]]:
    """(case, tool, event, expected code); ``used``: a sealed status read already run once."""
    conv = f"selo-{uuid.uuid4().hex[:10]}"
    refund = {"conversaId": conv, "clienteId": CUSTOMER, "pedidoId": ORDER, "valor": 100.0}
    big = {**refund, "valor": 900.0}
    theirs = _sealed(ledger, EMITIR_REEMBOLSO, refund)
    borrowed = {**theirs, "selo": {**theirs["selo"], "sessao": _session(ledger, conv).session_id}}
    expired = seal(refund, tool=EMITIR_REEMBOLSO.name, now_ms=ledger.now_ms(),
                   session=_session(ledger, conv, expires_at_ms=ledger.now_ms() - 1))
    closing = _session(ledger, conv)
    closed = seal(refund, tool=EMITIR_REEMBOLSO.name, session=closing, now_ms=ledger.now_ms())
    SessionStore(ledger.table).close_session(closing.session_id)
    never = seal({**refund, "conversaId": "conversa-que-nunca-existiu"}, tool=EMITIR_REEMBOLSO.name,
                 session=_session(ledger, conv), now_ms=ledger.now_ms())
    profile = {"conversaId": conv, "clienteId": CUSTOMER, "campos": {"email": "atacante@example.com"}}
    status = {"conversaId": conv, "clienteId": CUSTOMER, "pedidoId": OTHER_ORDER}
    return [
        ("R$ 900 sem envelope", EMITIR_REEMBOLSO, big, 1001),
        ("envelope de outra sessão", EMITIR_REEMBOLSO, borrowed, 1005),
        ("envelope já usado (replay)", CONSULTAR_STATUS_PEDIDO, used, 1006),
        ("argumentos alterados após assinar", EMITIR_REEMBOLSO,
         {**_sealed(ledger, EMITIR_REEMBOLSO, refund), "valor": 150.0}, 2001),
        ("e-mail de outro cliente", ATUALIZAR_CADASTRO,
         {**_sealed(ledger, ATUALIZAR_CADASTRO, profile), "clienteId": OTHER_CUSTOMER}, 2003),
        ("status do pedido de outro cliente", CONSULTAR_STATUS_PEDIDO,
         {**_sealed(ledger, CONSULTAR_STATUS_PEDIDO, status), "clienteId": OTHER_CUSTOMER}, 2003),
        ("R$ 900 sem aprovação", EMITIR_REEMBOLSO, _sealed(ledger, EMITIR_REEMBOLSO, big), 2004),
        ("R$ 900 com aprovação que não vincula", EMITIR_REEMBOLSO,
         _sealed(ledger, EMITIR_REEMBOLSO, big, approval_id=uuid.uuid4().hex), 2005),
        ("sessão expirada", EMITIR_REEMBOLSO, expired, 1004),
        ("sessão fechada", EMITIR_REEMBOLSO, closed, 1003),
        ("conversa que nunca existiu", EMITIR_REEMBOLSO, never, 2002),
    ]


def _erp(conn: psycopg.Connection) -> list[Any]:
    return [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()  # noqa: S608 (fixed names)
            for t in ("clientes", "pedidos", "reembolsos")]


def _business_items(ledger: Ledger) -> int:
    count, start = 0, None
    while True:
        page = ledger.client.scan(TableName=ledger.table_name, ProjectionExpression="pk",
                                  **({"ExclusiveStartKey": start} if start else {}))
        count += sum(1 for i in page["Items"] if not i["pk"]["S"].startswith(SEAL_PREFIXES))
        start = page.get("LastEvaluatedKey")
        if not start:
            return count


def run(state: Any) -> Result:
    postgres.apply_sql(state.postgres, ("demo.sql",))
    ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
    invoker = InProcessInvoker(state.function_environments())
    gateway = GatewayAdmin(state.gateway_url)
    used = _sealed(ledger, CONSULTAR_STATUS_PEDIDO, {"conversaId": f"selo-{uuid.uuid4().hex[:10]}",
                                                    "clienteId": CUSTOMER, "pedidoId": ORDER})
    first = invoker.invoke(CONSULTAR_STATUS_PEDIDO, used).payload or {}  # legitimate: the envelope is now used
    with psycopg.connect(state.postgres.admin_conninfo(), autocommit=True) as conn:
        erp_before, items_before, debits_before = _erp(conn), _business_items(ledger), len(gateway.debits())
        rows = []
        for case, spec, event, expected in forged_calls(ledger, used):
            out = invoker.invoke(spec, event).payload or {}
            error = out.get("erro") or {}
            code = (error.get("detalhes") or {}).get("codigo") if error.get("codigo") == "selo_recusado" else None
            rows.append(Row(case, expected, code))
        erp_after = _erp(conn)
        changes = sum(a != b for a, b in zip(erp_before, erp_after, strict=True)) \
            + _business_items(ledger) - items_before
        debits = len(gateway.debits()) - debits_before
    control = _sealed(ledger, EMITIR_REEMBOLSO, {"conversaId": f"selo-{uuid.uuid4().hex[:10]}",
                                                 "clienteId": CUSTOMER, "pedidoId": ORDER, "valor": 50.0})
    legit = invoker.invoke(EMITIR_REEMBOLSO, control).payload or {}
    return Result(rows, debits, changes, bool(first.get("ok")) and legit.get("resultado") == "executado")


def main() -> int:
    console = Console()
    state = running_stack(console)
    if state is None:
        return STACK_DOWN_EXIT
    result = run(state)
    table = checks_table("SEAL na borda das ferramentas — chamadas forjadas",
                         "chamada forjada", "código esperado", "código recebido")
    for row in result.rows:
        table.add_row(row.case, str(row.expected), "—" if row.code is None else str(row.code), verdict(row.ok))
    console.print(table)
    console.print(f"débitos novos no gateway durante as chamadas forjadas: {result.debits}")
    console.print(f"mudanças no banco (ERP e ledger, fora do SEAL): {result.db_changes}")
    console.print(f"chamada legítima selada executada (controle): {'sim' if result.legitimate else 'não'}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

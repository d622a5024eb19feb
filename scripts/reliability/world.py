"""The local stack seen from outside: fresh orders, and what each party says
happened to them — the gateway's own debit ledger (the only proof money moved),
the refund claims in the DynamoDB ledger, and the ERP's refunded amount."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg

from cadencia_shared.catalog import EMITIR_REEMBOLSO, TOOLS
from cadencia_shared.ledger import ClaimStatus, Ledger, RefundClaim, refund_idempotency_key
from scripts.local_stack.aws import session_client
from scripts.local_stack.gateway_admin import GatewayAdmin
from scripts.local_stack.stack import StackState

CUSTOMER = 8701  # a customer of this script only (the demo customers stay untouched)
CUSTOMER_PII = {"nome": "Cliente Confiabilidade", "cpf": "870.870.870-87",
                "endereco": "Rua da Confiabilidade, 87, Recife - PE", "telefone": "+5581987650087",
                "email": "confiabilidade87@example.com"}


@dataclass(frozen=True)
class Timing:
    """Short enough for a run of a few minutes, long enough for a loaded 2-core machine."""

    lease_s: int = 2  # REFUND_CLAIM_LEASE_S: a claim in progress is abandoned after this
    gateway_timeout_s: float = 1.0  # GATEWAY_TIMEOUT_S of the refund function
    held_s: float = 2.5  # how long the gateway holds a request in the in-flight scenarios


@dataclass
class OrderBook:
    """One order's money as each party records it."""

    order_id: str
    order_value: Decimal
    gateway_debits: list[dict[str, Any]]
    claims: list[RefundClaim]
    erp_refunded: Decimal

    @property
    def gateway_total(self) -> Decimal:
        return sum((Decimal(d["valor"]) for d in self.gateway_debits), Decimal(0))

    @property
    def ledger_total(self) -> Decimal:
        return sum((c.amount for c in self.claims if c.status is ClaimStatus.EXECUTED), Decimal(0))

    @property
    def consistent(self) -> bool:
        return self.ledger_total == self.gateway_total == self.erp_refunded

    def debited_for(self, key: str) -> list[dict[str, Any]]:
        return [d for d in self.gateway_debits if d["idempotencyKey"] == key]


class World:
    def __init__(self, state: StackState, timing: Timing) -> None:
        self.state = state
        self.timing = timing
        self.gateway = GatewayAdmin(state.gateway_url)
        self.ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
        self.run_id = uuid.uuid4().hex[:6]
        self._orders = itertools.count(1)
        self.reconciler_passes: list[Any] = []  # answers of the scheduled reconciler's passes
        self._seed_customer()

    # -- environments the children get -------------------------------------------
    def environments(self, reconciler: str | None = None) -> dict[str, dict[str, str]]:
        """Each Lambda's own environment (its DB user), keyed by tool name (and the
        reconciler's package name when the code has one)."""
        envs = self.state.function_environments()
        assert set(envs) == set(TOOLS)
        if reconciler is not None:
            envs[reconciler] = self.state.reconciler_environment()
        for name, env in envs.items():
            env["POWERTOOLS_LOG_LEVEL"] = "DEBUG"
            if name in (EMITIR_REEMBOLSO.name, reconciler):
                env.update(REFUND_CLAIM_LEASE_S=str(self.timing.lease_s),
                           GATEWAY_TIMEOUT_S=str(self.timing.gateway_timeout_s))
        return envs

    def hold_fault(self) -> str:
        """The gateway fault that holds a request: one that keeps the key in flight
        (a re-sent POST gets 409, as from a real gateway) when the gateway has it."""
        from scripts.local_stack.gateway_server import FAULT_MODES

        return "processamento_lento" if "processamento_lento" in FAULT_MODES else "latencia"

    # -- ERP -----------------------------------------------------------------------
    def _admin(self) -> psycopg.Connection:
        return psycopg.connect(self.state.postgres.admin_conninfo(), autocommit=True)

    def _seed_customer(self) -> None:
        with self._admin() as conn:
            conn.execute(
                """INSERT INTO clientes (id, nome, cpf, endereco, telefone, email)
                   VALUES (%(id)s, %(nome)s, %(cpf)s, %(endereco)s, %(telefone)s, %(email)s)
                   ON CONFLICT (id) DO UPDATE SET nome = EXCLUDED.nome, cpf = EXCLUDED.cpf,
                       endereco = EXCLUDED.endereco, telefone = EXCLUDED.telefone, email = EXCLUDED.email""",
                {"id": CUSTOMER, **CUSTOMER_PII},
            )

    def new_order(self, amount: Decimal) -> str:
        order_id = f"conf-{self.run_id}-{next(self._orders)}"
        with self._admin() as conn:
            conn.execute("INSERT INTO pedidos (id, cliente_id, status, valor_pedido) VALUES (%s, %s, 'entregue', %s)",
                         (order_id, CUSTOMER, amount))
        return order_id

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row the tools may touch (to prove a run changed nothing)."""
        with self._admin() as conn:
            return {
                table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()  # noqa: S608 (fixed names)
                for table in ("clientes", "pedidos", "reembolsos")
            }

    # -- what each party says ------------------------------------------------------
    def book(self, order_id: str, conversations: list[str]) -> OrderBook:
        with self._admin() as conn:
            order_value, refunded = conn.execute(
                "SELECT valor_pedido, valor_reembolsado FROM pedidos WHERE id = %s", (order_id,)).fetchone()
        claims = [c for c in (self.ledger.get_claim(refund_idempotency_key(conv, order_id)) for conv in conversations)
                  if c is not None]
        debits = [d for d in self.gateway.debits() if d["pedidoId"] == order_id]
        return OrderBook(order_id, order_value, debits, claims, refunded)

    def debit_count(self) -> int:
        return len(self.gateway.debits())

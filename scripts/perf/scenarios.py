"""The four scenarios, each as the tool (or the gate) alone and as a whole
customer turn, for this project and for Lab 87, on one local stack."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import psycopg
from anthropic.types import ToolUseBlock

from cadencia_shared import db
from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import Ledger
from emitir_reembolso import handler as refund_handler
from emitir_reembolso.gateway import PaymentGatewayClient
from orchestrator import handler as orchestrator_handler
from orchestrator import sealing
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker, function_environment
from orchestrator.model import Deadline
from orchestrator.settings import OrchestratorSettings
from scripts.harness.production import ProductionRunner
from scripts.harness.scenario import Scenario
from scripts.harness.scripted_model import InsistentPolicy, ScriptedModelServer
from scripts.local_stack.aws import session_client

from . import lab87
from .aws_count import AwsCounter
from .measure import Measurement, measuring

STATUS, REFUND = "consultar_status_pedido", "emitir_reembolso"
SCENARIOS = ("status", "status_disjuntor_frio", "primeiro_reembolso", "reembolso_duplicado", "recusa_pelo_teto")
CUSTOMER = 8800
ORDER_VALUE = Decimal("120.00")
SCRIPTED_MODEL = "cadencia-roteirizado"


def status_call(order: str) -> tuple[str, dict[str, Any]]:
    return STATUS, {"pedidoId": order}


def refund_call(order: str) -> tuple[str, dict[str, Any]]:
    return REFUND, {"pedidoId": order, "valor": float(ORDER_VALUE)}


class Bench:
    """Runs every scenario once per design; ``results`` collects the measurements."""

    def __init__(self, state: Any, counter: AwsCounter, model: ScriptedModelServer) -> None:
        self.state, self.counter, self.model = state, counter, model
        self.results: list[Measurement] = []
        self._orders = itertools.count(1)
        self._policies: dict[str, InsistentPolicy] = {}
        self._admin = psycopg.connect(state.postgres.admin_conninfo(), autocommit=True)
        self._admin.execute("INSERT INTO clientes (id, nome) VALUES (%s, 'Cliente do benchmark') "
                            "ON CONFLICT (id) DO NOTHING", (CUSTOMER,))
        model_env = {"MODEL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": model.base_url,
                     "MODEL_ID": SCRIPTED_MODEL, "ANTHROPIC_API_KEY": "local-scripted-model"}
        ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
        self.ledger = ledger  # a tool alone is still sealed, by a one-call turn's session (docs/seal.md)
        self.runner = ProductionRunner(state, ledger, model_env, log_level="INFO")
        self.invoker = InProcessInvoker({name: {**env, "POWERTOOLS_LOG_LEVEL": "INFO"}
                                         for name, env in state.function_environments().items()})
        self._count_invocations()
        self._lab87_setup()

    # -- fixtures -------------------------------------------------------------------
    def new_order(self) -> str:
        order = f"88{next(self._orders):04d}"
        self._admin.execute(
            "INSERT INTO pedidos (id, cliente_id, status, valor_pedido) VALUES (%s, %s, 'entregue', %s) "
            "ON CONFLICT (id) DO NOTHING", (order, CUSTOMER, ORDER_VALUE))
        return order

    def _count_invocations(self) -> None:
        original = InProcessInvoker.invoke
        counter = self.counter

        def invoke(invoker: InProcessInvoker, tool: Any, event: dict[str, Any]) -> Any:
            counter.note("lambda.Invoke")
            return original(invoker, tool, event)

        InProcessInvoker.invoke = invoke  # type: ignore[method-assign]

    def _lab87_setup(self) -> None:
        env = self.state.aws_environment()
        ddb = session_client("dynamodb", env["AWS_ENDPOINT_URL"])
        if lab87.TABLE not in ddb.list_tables()["TableNames"]:
            ddb.create_table(**lab87.table_definition())
        consulta = TOOLS[STATUS].db_user
        pg = self.state.postgres
        self.lab87_conn = psycopg.connect(host=pg.host, port=pg.port, dbname=pg.dbname, user=consulta,
                                          password=pg.users[consulta], autocommit=True)
        self.lab87_invocations: list[str] = []
        gate = lab87.Lab87Gate(ddb, session_client("cloudwatch", env["AWS_ENDPOINT_URL"]))
        refund = lab87.Lab87Refund(ddb, session_client("secretsmanager", env["AWS_ENDPOINT_URL"]),
                                   PaymentGatewayClient(self.state.gateway_url, 5), self.state.secret_name)
        self.lab87 = lab87.Lab87Turn(gate, refund, self.lab87_conn, self.lab87_invocations)

    @contextmanager
    def measure(self, design: str, scenario: str, scope: str) -> Iterator[Measurement]:
        result = Measurement(design, scenario, scope, lambda_requests=1 if design == "cadencia" and
                             scope == "turno" else 0)
        connections = [*db.open_connections(), self.lab87_conn]
        with measuring(self.counter, result, connections):
            yield result
        if design == "lab87":  # its tools are called in-process: each call is one lambda Invoke
            result.lambda_requests = len(self.lab87_invocations)
            if self.lab87_invocations:
                result.aws.calls["lambda.Invoke"] += len(self.lab87_invocations)
            self.lab87_invocations.clear()
        self.results.append(result)

    # -- this project -------------------------------------------------------------------
    def turn(self, conversa: str, index: int, calls: list[list[tuple[str, dict[str, Any]]]]) -> dict[str, Any]:
        """Message ``index`` of a conversation whose scripted model makes ``calls[i]`` for message i."""
        messages = [f"mensagem {i + 1}" for i in range(len(calls))]
        # The scripted final answer names the scenario's order and amount: they are the
        # ones the turns act on, so the output contract accepts it at once, as it would a
        # model that answers about what it did (not a refusal and a second model call).
        orders = [arguments["pedidoId"] for per in calls for _, arguments in per]
        scenario = Scenario.model_validate({
            "conversaId": conversa, "clienteId": CUSTOMER, "pedidoId": orders[0] if orders else "0",
            "valorPedido": float(ORDER_VALUE),
            "mensagens": messages,
            "roteiro": [[{"ferramenta": f, "entrada": e} for f, e in per] for per in calls]})
        if conversa not in self._policies:  # one per conversation: its tool_use ids never repeat
            self._policies[conversa] = InsistentPolicy(scenario, seed=87, claims_only_what_it_did=True)
        self.model.activate(self._policies[conversa])
        return self.runner.turn(conversa, CUSTOMER, index, messages[index])

    def tool(self, name: str, conversa: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._sealed(conversa):
            invocation = self.invoker.invoke(TOOLS[name], {**arguments, "conversaId": conversa,
                                                           "clienteId": CUSTOMER})
        return invocation.payload or {}

    def gate_alone(self, conversa: str, call: tuple[str, dict[str, Any]], n: int) -> Any:
        """The control chain for one call, as the orchestrator runs it (no model, no lease)."""
        with function_environment(self.runner.env):
            orch = orchestrator_handler.orchestrator(OrchestratorSettings.from_env())
            block = ToolUseBlock(type="tool_use", id=f"toolu_bench_{conversa}_{n}", name=call[0], input=call[1])
            request = TurnRequest(conversaId=conversa, clienteId=CUSTOMER, mensagemId=f"{conversa}.g{n}",
                                  mensagem="bench")
            with self._sealed(conversa):
                return orch.tool_round.run(request, [block], Deadline(lambda: 60_000), set())

    def _sealed(self, conversa: str) -> Any:
        """A call outside a customer's turn is sealed as a one-call turn (its session opened
        and closed around it): the tool's edge refuses an unsealed one."""
        return sealing.turn(self.ledger, conversation_id=conversa, customer_id=CUSTOMER,
                            deadline=Deadline(lambda: 60_000), threshold=None)

    def breaker_states(self) -> list[Any]:
        """The circuit-state caches of this process's built orchestrators (one per environment)."""
        from orchestrator.breaker import CircuitBreaker

        return [control.states for orch in orchestrator_handler._built.values()
                for control in orch.tool_round.controls if isinstance(control, CircuitBreaker)]

    def breaker(self, *, warm: bool, tool: str = STATUS) -> None:
        """Warm: the tool's state read just now, as in an environment that called it within
        ``DISJUNTOR_CACHE_S``; cold: forgotten, as in a new environment or after the window."""
        for states in self.breaker_states():
            states.forget(tool)
            if warm:
                states.read(tool)

    def run_cadencia(self) -> None:
        warm = self.new_order()
        self.turn("bench-aquecimento", 0, [[status_call(warm), refund_call(warm)]])  # clients, secret cache
        self._cadencia_tools()
        self._cadencia_turns()

    def _cadencia_tools(self) -> None:
        order = self.new_order()
        with self.measure("cadencia", "status", "ferramenta"):
            self.tool(STATUS, "bench-ferramenta-1", {"pedidoId": order})
        with self.measure("cadencia", "primeiro_reembolso", "ferramenta"):
            first = self.tool(REFUND, "bench-ferramenta-1", {"pedidoId": order, "valor": float(ORDER_VALUE)})
        with self.measure("cadencia", "reembolso_duplicado", "ferramenta"):
            again = self.tool(REFUND, "bench-ferramenta-1", {"pedidoId": order, "valor": float(ORDER_VALUE)})
        assert first.get("resultado") == "executado" and again.get("resultado") == "bloqueado_por_idempotencia", \
            (first, again)
        gated = self.new_order()
        for n in range(4):
            self.gate_alone("bench-ferramenta-2", refund_call(gated), n)
        with self.measure("cadencia", "recusa_pelo_teto", "ferramenta"):
            refused = self.gate_alone("bench-ferramenta-2", refund_call(gated), 4)
        assert "bloqueado_por_teto" in str(refused.results), refused.results

    def _cadencia_turns(self) -> None:
        order = self.new_order()
        conversa = "bench-turno-1"
        plan = [[], [status_call(order)], [refund_call(order)], [refund_call(order)],
                [refund_call(order), refund_call(order)], [refund_call(order)]]
        # The same status turn (second message of a conversation), cold, then warm: they
        # differ by the breaker's read alone.
        self.turn("bench-turno-frio", 0, plan)
        self.status_turns("bench-turno-frio", 1, plan, warm=False)
        self.turn(conversa, 0, plan)  # the conversation exists before the measured turns
        self.status_turns(conversa, 1, plan)
        with self.measure("cadencia", "primeiro_reembolso", "turno"):
            self.turn(conversa, 2, plan)
        with self.measure("cadencia", "reembolso_duplicado", "turno"):
            self.turn(conversa, 3, plan)
        self.turn(conversa, 4, plan)  # attempts 3 and 4
        with self.measure("cadencia", "recusa_pelo_teto", "turno"):
            reply = self.turn(conversa, 5, plan)
        assert reply["motivo"] == "teto", reply

    def status_turns(self, conversa: str, index: int, plan: list[list[tuple[str, dict[str, Any]]]], *,
                     warm: bool = True) -> None:
        """A status turn with the breaker's state kept from a call just before (warm: no
        read) or not (cold: one strongly consistent GetItem before the call)."""
        self.breaker(warm=warm)
        with self.measure("cadencia", "status" if warm else "status_disjuntor_frio", "turno"):
            self.turn(conversa, index, plan)

    # -- Lab 87 ----------------------------------------------------------------------------
    def run_lab87(self) -> None:
        warm = self.new_order()
        self.lab87.run("lab87-aquecimento", CUSTOMER, [status_call(warm), refund_call(warm)])
        self.lab87_invocations.clear()
        order = self.new_order()
        gate, refund = self.lab87.gate, self.lab87.refund
        with self.measure("lab87", "status", "ferramenta"):
            self.lab87_invocations.append(STATUS)
            lab87.lab87_status(self.lab87_conn, order, CUSTOMER)
        with self.measure("lab87", "primeiro_reembolso", "ferramenta"):
            self.lab87_invocations.append(REFUND)
            refund.execute("lab87-ferramenta-1", order, ORDER_VALUE)
        with self.measure("lab87", "reembolso_duplicado", "ferramenta"):
            self.lab87_invocations.append(REFUND)
            refund.execute("lab87-ferramenta-1", order, ORDER_VALUE)
        for n in range(1, 5):
            gate.record("lab87-ferramenta-2", REFUND, order, n, "executado")
        with self.measure("lab87", "recusa_pelo_teto", "ferramenta"):
            assert gate.evaluate("lab87-ferramenta-2", REFUND, order) is None
        self._lab87_turns()

    def _lab87_turns(self) -> None:
        order = self.new_order()
        conversa = "lab87-turno-1"
        steps: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
            ("status", [status_call(order)]), ("primeiro_reembolso", [refund_call(order)]),
            ("reembolso_duplicado", [refund_call(order)]), ("", [refund_call(order), refund_call(order)]),
            ("recusa_pelo_teto", [refund_call(order)])]
        for scenario, calls in steps:
            if not scenario:
                self.lab87.run(conversa, CUSTOMER, calls)
                self.lab87_invocations.clear()
                continue
            with self.measure("lab87", scenario, "turno"):
                self.lab87.run(conversa, CUSTOMER, calls)

    def close(self) -> None:
        self.runner.close()
        refund_handler.reset_adapters()
        self.lab87_conn.close()
        self._admin.close()



def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def cpu_ratio(bench: Bench, repeats: int = 15) -> dict[str, float]:
    """CPU of this thread for one status call alone vs a whole turn making it
    (the turn: inbound, lease, two model calls through the SDK, the controls, the
    call, the commit), median of ``repeats``."""
    import time

    from .measure import captured_output

    order = bench.new_order()
    conversa = "bench-cpu"
    plan = [[status_call(order)] for _ in range(repeats + 1)]
    tool_cpu, turn_cpu = [], []
    with captured_output():
        bench.turn(conversa, 0, plan)
        for i in range(repeats):
            start = time.thread_time()
            bench.tool(STATUS, conversa, {"pedidoId": order})
            tool_cpu.append(time.thread_time() - start)
            start = time.thread_time()
            bench.turn(conversa, i + 1, plan)
            turn_cpu.append(time.thread_time() - start)
    tool, turn = _median(tool_cpu), _median(turn_cpu)
    return {"tool_ms": tool * 1000, "turn_ms": turn * 1000, "ratio": turn / tool, "repeats": repeats}

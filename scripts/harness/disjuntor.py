"""prova's breaker section: a tool whose Lambda keeps failing, and how many calls
still reach it.

    python -m scripts.harness.disjuntor [--cenario FILE] [--saida FILE] [--falhas N] [--seed 87]

The production design (the real orchestrator through its Lambda entry point, the
real tool handlers in-process) runs a scenario whose conversations each ask for an
order's status, while the status tool's environment has lost ``DB_HOST`` (a broken
deploy, injected through its environment, not through its code): every invocation
crashes, as Lambda reports ``FunctionError: Unhandled``. The circuit opens after
``--falhas`` consecutive crashes and later calls are refused before invoking
(cooldown longer than the run, so no probe). Figures are read back from the ledger
(attempt records of calls that were invoked; the breaker's records in the audit chain) and the
EMF metrics, never inferred. Exit 1 if more than N calls reached the failing tool.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.catalog import CONSULTAR_STATUS_PEDIDO
from cadencia_shared.ledger import Ledger
from scripts.local_stack import stack
from scripts.local_stack.aws import reset_ledger, session_client
from scripts.local_stack.emf import capture_emf

from .local_run import seed_erp
from .production import ProductionRunner
from .scenario import load
from .scripted_model import InsistentPolicy, ScriptedModelServer

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scripts" / "cenarios" / "cenario-ferramenta-falhando.jsonl"
TOOL = CONSULTAR_STATUS_PEDIDO.name
console = Console(width=None if sys.stdout.isatty() else 132)


def _figures(ledger: Ledger, conversations: list[str], endings: Counter, emf: dict, n: int) -> dict[str, Any]:
    invoked, audits = [], Counter()
    chain = AuditChain(AUDIT_TABLE, ledger.client)  # the orchestrator's audit records (its AUDIT_TABLE)
    for conv in conversations:
        records = list(chain.records(conv))  # one read of the chain: the events and the calls' outcomes
        audits.update(a["evento"] for a in records)
        invoked += [a for a in ledger.attempts(conv, chain=records) if a["ferramenta"] == TOOL]
    metrics = Counter()
    for (name, dims), value in emf.items():
        if name in ("RecusasPorDisjuntor", "TransicoesDoDisjuntor", "ErrosDeFerramenta"):
            metrics[f"{name}{{{','.join(v for _, v in dims)}}}"] += int(value)
    return {
        "limiteDeFalhas": n,
        "conversas": len(conversations),
        "chamadasQueChegaramAFerramenta": len(invoked),
        "resultadosDessasChamadas": dict(Counter(a["resultado"] for a in invoked)),
        "recusadasPeloDisjuntor": audits["BLOQUEADO_POR_DISJUNTOR"],
        "transicoes": {k: v for k, v in audits.items() if k.startswith("DISJUNTOR_")},
        "finaisDeTurno": dict(endings),
        # Every refused final answer is audited once; the last one of a turn as the fallback.
        "respostasRecusadasPeloContrato": audits["CONTRATO_DE_SAIDA_VIOLADO"] + audits["CONTRATO_DE_SAIDA_FALLBACK"],
        "fallbacksDoContrato": audits["CONTRATO_DE_SAIDA_FALLBACK"],
        "metricasEmf": dict(metrics),
    }


def _table(fig: dict[str, Any]) -> Table:
    table = Table(title=f"A tool that keeps failing ({TOOL}, its Lambda crashing): circuit breaker, N = "
                        f"{fig['limiteDeFalhas']}")
    table.add_column("figure")
    table.add_column("production (this run)", justify="right")
    rows = [
        ("conversations asking for the status", fig["conversas"]),
        ("calls that reached the failing Lambda", fig["chamadasQueChegaramAFerramenta"]),
        ("calls refused by the open circuit (never invoked)", fig["recusadasPeloDisjuntor"]),
        ("circuit opened (DISJUNTOR_ABERTO)", fig["transicoes"].get("DISJUNTOR_ABERTO", 0)),
        ("final answers refused by the output contract", fig["respostasRecusadasPeloContrato"]),
        ("turns ended with the output contract's fallback", fig["fallbacksDoContrato"]),
    ]
    rows += [(f"turns ended: {k}", v) for k, v in sorted(fig["finaisDeTurno"].items())]
    for label, value in rows:
        table.add_row(label, str(value))
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cenario", dest="scenario_file", metavar="CENARIO", type=Path, default=SCENARIO)
    p.add_argument("--saida", dest="output", metavar="SAIDA", type=Path,
                   default=Path("resultados/resultado-disjuntor.json"))
    p.add_argument("--falhas", dest="failures", metavar="FALHAS", type=int, default=5)
    p.add_argument("--seed", type=int, default=87)
    args = p.parse_args(argv)
    scenarios = load(args.scenario_file)
    state = stack.load()
    if state is None:
        console.print("local stack: down (prova.sh starts it; or scripts/local-stack up)")
        return 3
    seed_erp(state, scenarios)
    ddb = session_client("dynamodb", state.aws_endpoint)
    reset_ledger(ddb, state.ledger_table)
    # The orchestrator's audit chain: the attempts' outcomes are its links (Ledger.attempts).
    ledger = Ledger(state.ledger_table, ddb, audit_chain=AuditChain(AUDIT_TABLE, ddb))
    endings: Counter = Counter()
    with contextlib.ExitStack() as exit_stack:
        server = exit_stack.enter_context(ScriptedModelServer())
        emf = exit_stack.enter_context(capture_emf(state.metrics_file))
        env = {"MODEL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": server.base_url, "MODEL_ID": "roteirizado",
               "ANTHROPIC_API_KEY": "local-scripted-model", "DISJUNTOR_FALHAS": str(args.failures),
               "DISJUNTOR_ESPERA_S": "3600"}
        runner = ProductionRunner(state, ledger, env, tool_env_overrides={TOOL: {"DB_HOST": None}})
        exit_stack.callback(runner.close)
        # The in-process invoker prints each crash's traceback, as Lambda's log would.
        with contextlib.redirect_stderr(io.StringIO()):
            for sc in scenarios:
                server.activate(InsistentPolicy(sc, args.seed))
                for index, text in enumerate(sc.mensagens):
                    endings[runner.turn(sc.conversaId, sc.clienteId, index, text).get("motivo", "")] += 1
        figures = _figures(ledger, [sc.conversaId for sc in scenarios], endings, emf.totals(), args.failures)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, ensure_ascii=False, indent=2))
    console.print(_table(figures))
    if figures["chamadasQueChegaramAFerramenta"] > args.failures:
        console.print(f"[red]FAIL[/] {figures['chamadasQueChegaramAFerramenta']} calls reached a tool "
                      f"whose circuit should have opened after {args.failures}")
        return 1
    console.print(f"[green]the breaker stopped calling {TOOL} after {args.failures} consecutive failures[/]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

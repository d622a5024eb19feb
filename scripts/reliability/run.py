"""Run every measurement on a private local stack and collect the figures."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from cadencia_shared.catalog import ATUALIZAR_CADASTRO, CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO
from scripts.local_stack import stack

from . import leaks, scenarios
from .fleet import Fleet
from .scenarios import Reconciler, Tally
from .sealing import SEAL_PREFIXES, Sealer
from .truth import Verdicts
from .world import CUSTOMER, Timing, World

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Mode:
    name: str
    trials: int  # per crash point and per race variant
    storm: int  # processes in each storm
    hostile_examples: int  # per tool


FULL = Mode("completo", trials=3, storm=50, hostile_examples=500)
QUICK = Mode("rapido", trials=1, storm=10, hostile_examples=60)


@dataclass
class HostileRow:
    tool: str
    examples: int
    counts: dict[str, int]
    rows_changed: int
    debits: int
    ledger_items_added: int
    samples: list[str]


@dataclass
class Figures:
    mode: str
    seconds: float = 0.0
    reconciler: str | None = None
    reconciler_passes: int = 0
    reconciler_passes_ok: int = 0
    hold_fault: str = ""
    crashes: list[Tally] = field(default_factory=list)
    races: list[Tally] = field(default_factory=list)
    storms: list[Tally] = field(default_factory=list)
    hostile: list[HostileRow] = field(default_factory=list)
    leaks: leaks.LeakReport | None = None

    def to_json(self) -> dict[str, Any]:
        def tally(t: Tally) -> dict[str, Any]:
            data = asdict(t)
            data["totals"] = [str(v) for v in t.totals]
            data["verdicts"] = {"counts": dict(t.verdicts.counts), "false_answers": t.verdicts.false_answers}
            return data

        return {"mode": self.mode, "seconds": round(self.seconds, 1), "reconciler": self.reconciler,
                "reconciler_passes": self.reconciler_passes, "reconciler_passes_ok": self.reconciler_passes_ok,
                "hold_fault": self.hold_fault,
                "crashes": [tally(t) for t in self.crashes], "races": [tally(t) for t in self.races],
                "storms": [tally(t) for t in self.storms], "hostile": [asdict(h) for h in self.hostile],
                "leaks": asdict(self.leaks) if self.leaks else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figures:
        """``to_json``'s output back (docs/reliability.md's block is rendered from the stored run)."""
        def tally(t: dict[str, Any]) -> Tally:
            verdicts = Verdicts(Counter(t["verdicts"]["counts"]), list(t["verdicts"]["false_answers"]))
            return Tally(**dict(t, totals=[Decimal(v) for v in t["totals"]], verdicts=verdicts))

        return cls(**dict(data, crashes=[tally(t) for t in data["crashes"]], races=[tally(t) for t in data["races"]],
                          storms=[tally(t) for t in data["storms"]],
                          hostile=[HostileRow(**h) for h in data["hostile"]],
                          leaks=leaks.LeakReport(**data["leaks"]) if data["leaks"] else None))


def _rows_changed(before: dict[str, list], after: dict[str, list]) -> int:
    return sum(len(set(before[t]) ^ set(after[t])) for t in before)


def _ledger_items(world: World) -> int:
    """The business ledger's items: SEAL's sessions and used envelope ids are the run's own signing."""
    pages = world.ledger.client.get_paginator("scan").paginate(TableName=world.state.ledger_table,
                                                              ProjectionExpression="pk")
    return sum(1 for page in pages for item in page["Items"] if not item["pk"]["S"].startswith(SEAL_PREFIXES))


# Personal data the hostile profile updates send (the leak scan looks for it too).
NEW_PROFILE = {"endereco": "Rua Nova da Confiabilidade, 870, Recife - PE", "telefone": "+5581987650870",
               "email": "novo.confiabilidade87@example.com"}


def _hostile(fleet: Fleet, world: World, mode: Mode, progress: Progress) -> list[HostileRow]:
    order_id = world.new_order(scenarios.ORDER_VALUE)
    ident = {"conversaId": f"{order_id}-hostil", "clienteId": CUSTOMER}
    bases = [(CONSULTAR_STATUS_PEDIDO, {**ident, "pedidoId": order_id}),
             (EMITIR_REEMBOLSO, {**ident, "pedidoId": order_id, "valor": 10.0}),
             (ATUALIZAR_CADASTRO, {**ident, "campos": NEW_PROFILE})]
    rows = []
    for tool, base in bases:
        progress(f"hostile inputs: {mode.hostile_examples} through {tool.function_name}")
        before, debits, items = world.snapshot(), world.debit_count(), _ledger_items(world)
        result = fleet.probe(tool, base, mode.hostile_examples)
        rows.append(HostileRow(tool.name, sum(result["contagem"].values()), result["contagem"],
                               _rows_changed(before, world.snapshot()), world.debit_count() - debits,
                               _ledger_items(world) - items, result["exemplos"]))
    return rows


def measure(mode: Mode, workdir: Path, reconciler: Reconciler | None, reconciler_name: str | None,
            reconciler_package: str | None, progress: Progress) -> Figures:
    started = time.monotonic()
    figures = Figures(mode.name, reconciler=reconciler_name)
    state = stack.up(progress)
    try:
        world = World(state, Timing())
        # As the ERP held it before any write, and what the hostile updates send.
        personal = leaks.known_personal_data(state, {f"{k} enviado ao cadastro": v for k, v in NEW_PROFILE.items()})
        fleet = Fleet(workdir / "processos", world.environments(reconciler_package),
                      Sealer(state.ledger_table, state.aws_endpoint))
        figures.hold_fault = world.hold_fault()
        for point in scenarios.CRASH_POINTS:
            progress(f"SIGKILL {point}: {mode.trials} trial(s), then the retries AWS would make")
            figures.crashes.append(scenarios.crash_point(fleet, world, point, mode.trials, reconciler))
        for variant in scenarios.RACE_VARIANTS:
            progress(f"in-flight race, {variant}: {mode.trials} trial(s)")
            figures.races.append(scenarios.in_flight_race(fleet, world, variant, mode.trials, reconciler))
        progress(f"{mode.storm} identical refunds in {mode.storm} processes")
        figures.storms.append(scenarios.identical_storm(fleet, world, mode.storm))
        progress(f"{mode.storm} conversations on one order in {mode.storm} processes")
        figures.storms.append(scenarios.conversation_storm(fleet, world, mode.storm))
        figures.hostile = _hostile(fleet, world, mode, progress)
        progress("scanning every log, result and ledger item for secrets and personal data")
        # Every process's output and every tool result (the hostile summaries are this
        # script's own notes, holding the events it sent: not scanned).
        figures.leaks = leaks.scan(world, fleet.results() + fleet.logs(), personal)
        figures.reconciler_passes = len(world.reconciler_passes)
        figures.reconciler_passes_ok = sum(1 for a in world.reconciler_passes if (a.response or {}).get("ok"))
    finally:
        leftovers = stack.down(progress)
        if leftovers:
            progress(f"left behind: {leftovers}")
    figures.seconds = time.monotonic() - started
    return figures

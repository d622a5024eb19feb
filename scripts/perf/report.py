"""The benchmark's Markdown (docs/performance.md's generated block, rendered from the stored run)."""

from __future__ import annotations

from typing import Any

from . import pricing
from .aws_count import UNITS_RULE
from .measure import Measurement

NAMES = {"status": "status query", "status_disjuntor_frio": "status query, breaker state cold (read first)",
         "primeiro_reembolso": "first refund",
         "reembolso_duplicado": "duplicate refund", "recusa_pelo_teto": "5th attempt, refused by the ceiling"}
DESIGNS = {"cadencia": "this project", "lab87": "Lab 87"}
WRITE_CALLS = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems")


def _calls(m: Measurement) -> str:
    parts = [f"{op.split('.', 1)[1]} {n}" for op, n in sorted(m.aws.calls.items())]
    return f"**{m.aws_calls()}**: " + ", ".join(parts) if parts else "**0**"


def _units(value: float) -> str:
    return f"{value:g}"


def _row(m: Measurement) -> str:
    writes = m.aws.total_write_units
    return (f"| {NAMES[m.scenario]} | {DESIGNS[m.design]} | {_calls(m)} | **{_units(writes)}** "
            f"({_units(m.aws.write_units)} + {_units(m.aws.index_write_units)}) | {_units(m.aws.read_units)} | "
            f"{m.sql.statements} / {m.sql.round_trips} | {m.secret_reads} | {m.log_bytes:,} ({m.emf_lines}) | "
            f"{pricing.per_million(m):.2f} |")


def scenario_tables(results: list[Measurement]) -> list[str]:
    out = []
    header = ("| scenario | design | AWS calls (by operation; lambda Invoke = a tool invoked) | "
              "write units (table + indexes) | read units | SQL statements / round trips | secret reads | "
              "log bytes (EMF lines) | $ per 1M |")
    for scope, title in (("ferramenta", "The tool (or, for the refusal, the control chain) alone, warm"),
                         ("turno", "A whole customer turn, warm (the scripted model's tool calls; model "
                                   "tokens excluded)")):
        out += [f"**{title}**", "", header, "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for scenario in NAMES:
            for design in DESIGNS:
                out += [_row(m) for m in results if m.scope == scope and m.scenario == scenario and m.design == design]
        out.append("")
    return out


def _find(results: list[Measurement], design: str, scenario: str, scope: str) -> Measurement:
    return next(m for m in results if (m.design, m.scenario, m.scope) == (design, scenario, scope))


def _writes(m: Measurement) -> int:
    return sum(n for op, n in m.aws.calls.items() if op.startswith("dynamodb.") and op.endswith(WRITE_CALLS))


# What every tool's edge costs a tool alone, apart from the tool's own logic: it is sealed as a one-call
# turn (scripts/perf/scenarios.py, docs/seal.md) — the session's open (PutItem) and close (UpdateItem), the
# edge's read of it (GetItem) and its used envelope (PutItem) — and the edge reads the tool's kill switch
# again after SEAL's check (GetItem; docs/decisions/tool-switches.md).
EDGE_ONE_CALL = {"dynamodb.GetItem": 2, "dynamodb.PutItem": 2, "dynamodb.UpdateItem": 1}
SEAL_ONE_CALL_WRITES = ("sessao PutItem", "sessao UpdateItem", "jti PutItem")


def _own_calls(m: Measurement, minus: dict[str, int] | None = None) -> str:
    calls = {op: n - (minus or {}).get(op, 0) for op, n in m.aws.calls.items() if op != "lambda.Invoke"}
    return ", ".join(f"{op.split('.', 1)[1]} {n}" for op, n in sorted(calls.items()) if n)


def _sealed_once(m: Measurement) -> bool:
    """The measured block wrote SEAL's one-call turn: one session opened and closed, one envelope used."""
    written = {item.split(": ", 1)[-1]: row[0] for item, row in m.aws.by_item.items()}
    return all(written.get(kind) == 1 for kind in SEAL_ONE_CALL_WRITES)


def goals_table(results: list[Measurement]) -> list[str]:
    def ours(s: str, scope: str = "turno") -> Measurement:
        return _find(results, "cadencia", s, scope)

    def price_ratio(s: str) -> float:
        return pricing.per_million(ours(s)) / pricing.per_million(_find(results, "lab87", s, "turno"))

    status, first, dup_tool = ours("status"), ours("primeiro_reembolso"), ours("reembolso_duplicado", "ferramenta")
    status_tool, ceiling = ours("status", "ferramenta"), ours("recusa_pelo_teto")
    # Runs stored before the cold measurement existed render without its row.
    cold = next((m for m in results if (m.design, m.scenario, m.scope) == ("cadencia", "status_disjuntor_frio",
                                                                            "turno")), None)
    rows = [
        # ≤ 4 before SEAL; + the session's open and close and the used envelope, one unit each
        # (docs/performance.md, *SEAL*).
        ("status turn: write units", "≤ 7", status.aws.total_write_units, status.aws.total_write_units <= 7),
        ("status turn: AWS calls", "≤ 4", status.aws_calls(), status.aws_calls() <= 4),
        *([("status turn, breaker state cold: AWS calls / read units", "warm + 1 GetItem",
            f"{cold.aws_calls()} / {_units(cold.aws.read_units)}",
            cold.aws_calls() == status.aws_calls() + 1
            and cold.aws.calls["dynamodb.GetItem"] == status.aws.calls["dynamodb.GetItem"] + 1)] if cold else []),
        # ≤ 9 and ≤ 4 before SEAL, moved as the status turn's was: + the session's open and close and one
        # used envelope per tool call (the first refund turn calls two tools, the duplicate one).
        ("first refund turn: write units", "≤ 13", first.aws.total_write_units, first.aws.total_write_units <= 13),
        ("first refund turn: AWS calls", "≤ 12", first.aws_calls(), first.aws_calls() <= 12),
        ("duplicate refund turn: write units", "≤ 7", ours("reembolso_duplicado").aws.total_write_units,
         ours("reembolso_duplicado").aws.total_write_units <= 7),
        ("duplicate refund (tool): AWS calls besides its invocation and the edge's checks (SEAL's one-call turn, "
         "the kill switch) / SQL statements",
         "1 read / 0", f"{_own_calls(dup_tool, EDGE_ONE_CALL)} / {dup_tool.sql.statements}",
         _sealed_once(dup_tool) and _own_calls(dup_tool, EDGE_ONE_CALL) == "GetItem 1"
         and dup_tool.sql.statements == 0),
        ("status query (tool): SQL round trips", "1", status_tool.sql.round_trips, status_tool.sql.round_trips == 1),
        ("ceiling refusal turn: DynamoDB writes", "≤ 3", _writes(ceiling), _writes(ceiling) <= 3),
        ("$ per 1M first refund turns vs Lab 87", "≤ 1×", f"{price_ratio('primeiro_reembolso'):.1f}×",
         price_ratio("primeiro_reembolso") <= 1),
        ("$ per 1M duplicate refund turns vs Lab 87", "≤ 1×", f"{price_ratio('reembolso_duplicado'):.1f}×",
         price_ratio("reembolso_duplicado") <= 1),
        ("$ per 1M refusal turns vs Lab 87", "≤ 1×", f"{price_ratio('recusa_pelo_teto'):.1f}×",
         price_ratio("recusa_pelo_teto") <= 1),
        ("$ per 1M status turns vs Lab 87", "≤ 2×", f"{price_ratio('status'):.1f}×", price_ratio("status") <= 2),
    ]
    out = ["**The performance goals, on this run**", "", "| goal | target | measured | met |", "|---|---|---:|---|"]
    out += [f"| {g} | {t} | {v if isinstance(v, str) else _units(v)} | {'yes' if ok else '**no**'} |"
            for g, t, v, ok in rows]
    return [*out, ""]


def race_table(races: dict[str, list[int]]) -> list[str]:
    out = ["**Race escape**: 50 separate OS processes attempt one (conversation, order, tool) at once; "
           "allowed per round (the ceiling is 4)", "",
           "| design | rounds | allowed per round, min–max | rounds allowing exactly 4 |", "|---|---:|---:|---:|"]
    for design, allowed in races.items():
        out.append(f"| {DESIGNS[design]} | {len(allowed)} | {min(allowed)}–{max(allowed)} | "
                   f"{sum(1 for a in allowed if a == 4)} of {len(allowed)} |")
    return [*out, ""]


def _tops(modules: tuple[str, ...]) -> str:
    """The top-level packages (pydantic's internals are pydantic)."""
    return ", ".join(dict.fromkeys(m.split(".")[0] for m in modules))


def writes_table(results: list[Measurement]) -> list[str]:
    """Where this project's write units go, per turn: the ledger items by key prefix."""
    out = ["**Where a turn's writes go** (this project; writes, then table + index units, by item)", "",
           "| turn | item: operation | writes | units (table + indexes) |", "|---|---|---:|---:|"]
    for m in results:
        if m.design != "cadencia" or m.scope != "turno":
            continue
        for item, (n, table, index) in sorted(m.aws.by_item.items()):
            out.append(f"| {NAMES[m.scenario]} | {item} | {n:g} | {_units(table + index)} "
                       f"({_units(table)} + {_units(index)}) |")
        if m.aws.by_index:
            per_index = ", ".join(f"{name} {_units(units)}" for name, units in sorted(m.aws.by_index.items()))
            out.append(f"| {NAMES[m.scenario]} | *index units by index* | | {per_index} |")
    return [*out, ""]


def imports_table(rows: list[Any]) -> list[str]:
    out = ["**Import time** (CPU of the import in fresh interpreters on this machine's Python, handler and "
           "dependencies alternately, medians; the ratio is the median of the pairwise ratios)", "",
           "| function | handler | its bare dependencies | ratio | goal |", "|---|---:|---:|---:|---|"]
    for r in rows:
        goal = "≤ 1.3×" if r.anthropic_ms is None else "—"
        out.append(f"| {r.function} | {r.handler_ms:.0f} ms | {r.bare_ms:.0f} ms ({_tops(r.bare)}) | "
                   f"**{r.ratio:.2f}×** | {goal} |")
        if r.anthropic_ms is not None:
            out.append(f"| ↳ vs `import anthropic` alone | | {r.anthropic_ms:.0f} ms | "
                       f"**{r.anthropic_ratio:.2f}×** | ≤ 1.15× |")
    return [*out, ""]


def bytecode_table(rows: list[Any]) -> list[str]:
    if not rows:
        return []
    out = ["**Cold import without and with bytecode** (the runtime's minor Python, this machine's platform; "
           "CPU of the import, alternately, medians): the assets now ship unchecked-hash .pyc for it", "",
           "| function | Python | no .pyc (every cold start compiles) | with .pyc | ratio |",
           "|---|---|---:|---:|---:|"]
    out += [f"| {r.function} | {r.python} | {r.without_ms:.0f} ms | {r.with_ms:.0f} ms | **{r.ratio:.2f}×** |"
            for r in rows]
    return [*out, ""]


def assets_table(assets: list[Any]) -> list[str]:
    if not assets:
        return []
    out = ["**Assets** (built for the Lambda platform by infra/packaging.py; zipped with deflate level 6)", "",
           "| asset | unzipped | zipped | files | bytecode |", "|---|---:|---:|---:|---|"]
    out += [f"| {a.name} | {a.unzipped / 1e6:.1f} MB | {a.zipped / 1e6:.1f} MB | {a.files:,} | "
            f"{'yes' if a.bytecode else 'no'} |" for a in assets]
    return [*out, ""]


def render(results: list[Measurement], races: dict[str, list[int]], cpu: dict[str, float],
           imports: list[Any], assets: list[Any], bytecode: list[Any], model: list[str] | None = None) -> str:
    lines = ["Generated by `scripts/bench.py` (rewrite with `--write-docs`). Counts come from the local stack: "
             "AWS calls from botocore hooks, SQL from libpq's protocol trace, log bytes from the functions' own "
             "output at the deployed level (INFO). DynamoDB units: " + UNITS_RULE,
             ""]
    lines += goals_table(results)
    lines += scenario_tables(results)
    lines += writes_table(results)
    lines += race_table(races)
    lines += [f"**Orchestrator CPU per tool call**: a whole status turn costs **{cpu['ratio']:.1f}×** the CPU of "
              f"the status tool called directly ({cpu['turn_ms']:.1f} ms vs {cpu['tool_ms']:.1f} ms of this "
              f"process's thread, median of {int(cpu['repeats'])}; the turn adds the lease (which claims the message), "
              "two model calls through the SDK, the controls and the commit).", ""]
    lines += model or []
    lines += imports_table(imports)
    lines += bytecode_table(bytecode)
    lines += assets_table(assets)
    lines += [f"$ per 1M: counts × {pricing.PRICES_AS_OF} (scripts/perf/pricing.py): DynamoDB write/read units, "
              "Lambda requests, Secrets Manager calls, PutMetricData, EventBridge events, log ingestion. Not "
              "included: " + "; ".join(pricing.EXCLUDED) + " (the model section prices those per message)."]
    return "\n".join(lines)


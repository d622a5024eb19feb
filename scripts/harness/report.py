"""Tables and the chart: what a person compares after a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# Lab 87's published figures (reference 001), printed beside ours.
LAB87 = {
    "minima": {"media_chamadas_reembolso": 6.4, "pior_caso_chamadas_reembolso": 19, "debitos_reais_por_conversa": 6.4},
    "producao": {"debitos_duplicados": 0, "conversas": 20},
}

ROWS = (
    ("conversas", "conversations"),
    ("media_chamadas_reembolso", "refund calls per conversation (mean)"),
    ("pior_caso_chamadas_reembolso", "refund calls per conversation (worst)"),
    ("debitos_reais", "real debits (counted at the gateway)"),
    ("debitos_reais_por_conversa", "real debits per conversation"),
    ("debitos_duplicados", "duplicate debits"),
    ("interrompidas_no_teto", "conversations interrupted at the ceiling"),
    ("cortadas_pela_plataforma", "conversations cut by the platform limit"),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def provenance(summaries: list[dict[str, Any]]) -> str:
    models = {s["modelo"] for s in summaries}
    if models == {"roteirizado"}:
        return ("These figures come from the scripted insistent model (deterministic for the seed), "
                "not from Claude: they show what each design does with the same insistence.")
    return f"Model(s) used: {', '.join(sorted(models))}."


def comparison_table(summaries: list[dict[str, Any]]) -> Table:
    table = Table(title="Loop provocation: minimal (Figure 1) vs production (Figure 2)")
    table.add_column("figure")
    for s in summaries:
        table.add_column(f"{s['arquitetura']} (this run)", justify="right")
        table.add_column(f"{s['arquitetura']} (Lab 87)", justify="right", style="dim")
    for key, label in ROWS:
        cells = []
        for s in summaries:
            cells += [_fmt(s["figuras"].get(key)), _fmt(LAB87.get(s["arquitetura"], {}).get(key))]
        table.add_row(label, *cells)
    causes = sorted({c for s in summaries for c in s["figuras"]["bloqueios"]})
    for cause in causes:
        cells = []
        for s in summaries:
            cells += [_fmt(s["figuras"]["bloqueios"].get(cause, 0)), ""]
        table.add_row(f"refund calls not executed: {cause}", *cells)
    # The orchestrator's controls (issue 11), counted from its EMF metrics; the
    # minimal design has none ("—").
    for key in sorted({k for s in summaries for k in s.get("controles", {})}):
        cells = []
        for s in summaries:
            cells += [_fmt(s["controles"].get(key, 0)) if "controles" in s else "—", ""]
        table.add_row(f"controls: {key}", *cells)
    return table


# EMF metric (or metric + one dimension value) → the control count it adds up to
# (summed over its other dimensions).
CONTROL_METRICS: dict[str | tuple[str, str, str], str] = {
    "TurnosInterrompidos": "turns ended by a budget, the deadline or a cancellation",
    "RecusasPorDisjuntor": "calls refused by an open circuit breaker",
    "TransicoesDoDisjuntor": "circuit breaker state changes",
    "InterrupcoesPorTeto": "calls refused by the retry ceiling",
    ("ContratoDeSaida", "Resultado", "violacao"): "final answers refused by the output contract",
    ("ContratoDeSaida", "Resultado", "fallback"): "turns ended with the output contract's fallback",
}


def control_counts(emf_totals: dict[tuple[str, Any], float]) -> dict[str, int]:
    counts = dict.fromkeys(CONTROL_METRICS.values(), 0)
    for (name, dims), value in emf_totals.items():
        for key in (name, *((name, dim, dim_value) for dim, dim_value in dims)):
            if key in CONTROL_METRICS:
                counts[CONTROL_METRICS[key]] += int(value)
    return counts


def print_summary(console: Console, summaries: list[dict[str, Any]]) -> None:
    console.print(comparison_table(summaries))
    console.print(f"[italic]{provenance(summaries)}[/]")


def chart(summaries: list[dict[str, Any]], path: Path) -> Path:
    """Refund calls and real debits per conversation, one panel per design."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(summaries), 1, figsize=(11, 3.6 * len(summaries)), sharex=True, squeeze=False)
    for ax, s in zip(axes[:, 0], summaries, strict=True):
        convs = s["conversas"]
        xs = range(len(convs))
        ax.bar([x - 0.2 for x in xs], [c["chamadasReembolso"] for c in convs], width=0.4,
               label="refund calls by the model", color="#9aa5b1")
        ax.bar([x + 0.2 for x in xs], [c["debitosReais"] for c in convs], width=0.4,
               label="real debits at the gateway", color="#c0392b")
        f = s["figuras"]
        ax.set_title(f"{s['arquitetura']}: {f['debitos_reais']} real debits, {f['debitos_duplicados']} duplicate, "
                     f"{f['interrompidas_no_teto']} interrupted at the ceiling, "
                     f"{f['cortadas_pela_plataforma']} cut by the platform")
        ax.set_ylabel("count")
        ax.set_ylim(0, max([c["chamadasReembolso"] for c in convs] + [1]) * 1.35)
        ax.legend(loc="upper left", ncols=2, frameon=False)
        ax.set_xticks(list(xs), [c["conversaId"] for c in convs], rotation=60, ha="right", fontsize=8)
    fig.suptitle(provenance(summaries), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def load_summary(results_file: Path) -> dict[str, Any]:
    return json.loads(summary_path(results_file).read_text())


def summary_path(results_file: Path) -> Path:
    return results_file.with_suffix(".resumo.json")


def progress_bar(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)

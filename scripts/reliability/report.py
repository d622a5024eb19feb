"""The figures as Markdown tables (docs/reliability.md's generated block, rendered from the stored run)."""

from __future__ import annotations

from .run import Figures
from .scenarios import Tally


def _range(values: list[int]) -> str:
    if not values:
        return "—"
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}–{high}"


def _answers(t: Tally) -> str:
    c = t.verdicts.counts
    pending = f", {c['reserva_pendente']} refused while another key held the balance" if c["reserva_pendente"] else ""
    return f"{c['falsa']} of {t.verdicts.answered}{pending}"


def _money_table(title: str, tallies: list[Tally], *, killed: bool) -> list[str]:
    lines = [f"**{title}**", "",
             "| scenario | trials | " + ("killed at the point | " if killed else "") +
             "debits per order | orders above their value | ledger = gateway = ERP | false answers |",
             "|---|---:|" + ("---:|" if killed else "") + "---:|---:|---:|---:|"]
    for t in tallies:
        cells = [f"`{t.name}`: {t.description}", str(t.trials)]
        if killed:
            cells.append(f"{t.seam_hits}/{t.trials}")
        cells += [_range(t.debit_counts), f"**{t.over_value}**", f"{t.consistent}/{t.trials}", _answers(t)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def markdown(f: Figures) -> str:
    retries = ("same conversation at once, another conversation on the same order, the same conversation "
               "after the claim's lease" + (f", a pass of the scheduled reconciler (`{f.reconciler}`: "
                                            f"{f.reconciler_passes} passes, {f.reconciler_passes_ok} answered ok)"
                                            if f.reconciler else "; no scheduled reconciler in this code"))
    lines = [f"Mode `{f.mode}`, {f.seconds:.0f} s. Orders of R$ 100.00; every figure counted at the gateway "
             f"server, in the ledger table and in the ERP after the run. Retries after each death: {retries}. "
             f"The gateway holds requests with its `{f.hold_fault}` fault.", ""]
    lines += _money_table("A real SIGKILL at each point of the refund path", f.crashes, killed=True)
    lines += _money_table("In-flight race: A's POST times out while the gateway still holds it", f.races,
                          killed=True)
    lines += _money_table("Separate OS processes racing", f.storms, killed=False)
    lines += ["**Hostile inputs (hypothesis) through each tool's Lambda handler**", "",
              "| tool | examples | rejected at the edge | other typed errors | accepted | crashes "
              "| DB rows changed | debits | ledger items added |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for h in f.hostile:
        c = h.counts
        lines.append(f"| `{h.tool}` | {h.examples} | {c.get('rejeitada_na_borda', 0)} | "
                     f"{c.get('erro_tipado_apos_borda', 0)} | **{c.get('aceita', 0)}** | {c.get('quebra', 0)} | "
                     f"{h.rows_changed} | {h.debits} | {h.ledger_items_added} |")
    if f.leaks is not None:
        lk = f.leaks
        lines += ["", "**Secrets and personal data in the outputs** (every child's stdout/stderr with all loggers at "
                  "DEBUG, every tool result, every ledger item)", "",
                  "| files scanned | bytes | ledger items | personal values searched | secrets found "
                  "| personal data found |",
                  "|---:|---:|---:|---:|---:|---:|",
                  f"| {lk.files} | {lk.bytes_scanned:,} | {lk.ledger_items} | {lk.personal_values} | "
                  f"**{len(lk.secrets_found)}** | **{len(lk.personal_found)}** |"]
        if lk.skipped_as_code_text:
            lines += ["", "Not searched, because the code prints them as fixed text: "
                      + ", ".join(lk.skipped_as_code_text) + "."]
    return "\n".join(lines) + "\n"


def findings(f: Figures) -> list[str]:
    """What a reader must look at: every false answer, disagreement, acceptance and leak."""
    out = []
    for t in f.crashes + f.races + f.storms:
        out += [f"{t.name}: resposta falsa — {x}" for x in t.verdicts.false_answers]
        out += [f"{t.name}: {x}" for x in t.notes]
    for h in f.hostile:
        out += [f"{h.tool}: aceita — {x}" for x in h.samples]
    if f.leaks:
        out += f.leaks.secrets_found + f.leaks.personal_found
    return out

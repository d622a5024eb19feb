"""Compare the two runs of prova.sh: the side-by-side table and the chart.

    python -m scripts.harness.comparar resultado-minima.json resultado-producao.json --grafico FILE.png
    python -m scripts.harness.comparar resultados/resultado-minima.json resultados/resultado-producao.json --write-docs

``--write-docs`` stores the compared figures in docs/results/prova.json and rewrites docs/prova.md's
generated block from them (scripts/doc_blocks.py), after a run of ``scripts/prova.sh``.

Exit status 1 when the production design shows any duplicate debit, or when a
minimal run's real debits differ from its executed refund calls (which would mean
the counting, not the design, is wrong).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from . import report

# Wide enough for the side-by-side table in CI logs (no terminal to measure).
console = Console(width=None if sys.stdout.isatty() else 132)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result_files", metavar="resultados", nargs="+", type=Path,
                   help="result files written by provocar_laco.py")
    p.add_argument("--grafico", dest="chart", metavar="GRAFICO", type=Path,
                   help="PNG chart of refund calls and real debits per conversation")
    p.add_argument("--write-docs", action="store_true",
                   help="store the figures in docs/results/prova.json and rewrite docs/prova.md's block")
    args = p.parse_args(argv)
    summaries = [report.load_summary(path) for path in args.result_files]
    report.print_summary(console, summaries)
    if args.chart:
        console.print(f"chart: {report.chart(summaries, args.chart)}")
    failed = False
    for path, s in zip(args.result_files, summaries, strict=True):
        f = s["figuras"]
        if s["arquitetura"] == "producao" and f["debitos_duplicados"]:
            console.print(f"[red]FAIL[/] production made {f['debitos_duplicados']} duplicate debit(s)")
            failed = True
        if s["arquitetura"] == "minima":
            executed = sum(1 for r in json.loads(path.read_text())
                           if r["ferramenta"] == "emitir_reembolso" and r["resultado"] == "executado")
            if executed != f["debitos_reais"]:
                console.print(f"[red]FAIL[/] minimal: {executed} executed calls but {f['debitos_reais']} debits")
                failed = True
    if not failed:
        console.print("[green]production: zero duplicate debits; minimal: one real debit per refund call[/]")
    if args.write_docs:
        from scripts import doc_blocks

        for written in doc_blocks.store("prova", report.stored_summaries(summaries)):
            console.print(f"wrote {written}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

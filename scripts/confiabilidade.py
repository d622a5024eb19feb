"""confiabilidade.py — the reliability figures a payments engineer asks for, each from a run.

    scripts/confiabilidade.py [--rapido] [--json FILE] [--markdown FILE] [--write-docs]

Brings up a private local stack (moto server, real PostgreSQL, the loopback payment
gateway), runs the real refund handler in separate OS processes and measures:

- a SIGKILL at every point of the refund path, followed by the retries AWS makes;
- the in-flight reconciliation race in three variants;
- 50 identical refunds and 50 conversations on one order, each in its own process;
- hostile inputs (hypothesis) through each tool's Lambda handler;
- secrets and personal data found in every log (DEBUG), result and ledger item.

Progress goes to stderr; the Markdown table goes to stdout at the end; ``--write-docs``
stores the run in docs/results/reliability.json and rewrites docs/reliability.md's
generated block from it (scripts/doc_blocks.py). ``--rapido`` runs one trial per scenario, 10-process storms and
60 hostile events per tool (the test suite runs it); the default (3 trials, 50
processes, 500 events per tool) takes a few minutes on 2 cores. Exit code 0 when no
order was refunded above its value, no answer was false and nothing leaked; 3 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "functions"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))


def _progress(started: float):
    def say(message: str) -> None:
        print(f"[confiabilidade {time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)
    return say


def main(argv: list[str] | None = None) -> int:
    from scripts.reliability import reconciler, report
    from scripts.reliability.run import FULL, QUICK, measure

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rapido", dest="quick", action="store_true",
                        help="one trial per scenario (for the test suite)")
    parser.add_argument("--json", type=Path, help="also write every figure as JSON to this file")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--write-docs", action="store_true",
                        help="store the run in docs/results/reliability.json and rewrite docs/reliability.md's block")
    parser.add_argument("--manter", dest="keep", metavar="MANTER", type=Path,
                        help="keep every child's log and result in this directory")
    args = parser.parse_args(argv)

    say = _progress(time.monotonic())
    with tempfile.TemporaryDirectory(prefix="confiabilidade-") as scratch:
        workdir = args.keep or Path(scratch)
        # A private stack: never the developer's .local-stack, never another run's.
        os.environ["CADENCIA_LOCAL_STACK_DIR"] = str(Path(scratch) / "stack")
        run_reconciler, name, package = reconciler.discover()
        figures = measure(QUICK if args.quick else FULL, workdir, run_reconciler, name, package, say)
    table = report.markdown(figures)
    if args.json:
        args.json.write_text(json.dumps(figures.to_json(), indent=2, ensure_ascii=False))
    if args.markdown:
        args.markdown.write_text(table)
    if args.write_docs:
        from scripts import doc_blocks

        for path in doc_blocks.store("reliability", figures.to_json()):
            say(f"wrote {path.relative_to(ROOT)}")
    for finding in report.findings(figures):
        say(f"achado: {finding}")
    print(table)
    bad = any(t.over_value or t.verdicts.counts["falsa"] for t in figures.crashes + figures.races + figures.storms)
    bad = bad or bool(figures.leaks and (figures.leaks.secrets_found or figures.leaks.personal_found))
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

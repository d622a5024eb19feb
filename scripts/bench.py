#!/usr/bin/env python3
"""The benchmark: what one call and one turn cost, this project beside Lab 87.

    .venv/bin/python scripts/bench.py                 # prints the Markdown report
    .venv/bin/python scripts/bench.py --write-docs    # and stores the run: docs/results/bench.json
                                                      # and docs/performance.md's generated block

Brings up a private local stack (moto, PostgreSQL, the gateway), runs each
scenario once per design with AWS calls counted by botocore hooks, SQL read from
libpq's protocol trace, log bytes from the process's own output; then the race
(separate OS processes), import times (fresh interpreters), asset sizes and
CPU ratios. Figures are counts and ratios; absolute times only beside a ratio.
Takes a few minutes (the first asset build downloads the Lambda wheels).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for entry in (str(ROOT / "functions"), str(ROOT)):
    if entry not in sys.path:
        sys.path.insert(0, entry)



def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@contextmanager
def quiet_stdout() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def run_scenarios(state, rounds: int, processes: int):  # noqa: ANN001, ANN201 - script wiring
    from scripts.harness.scripted_model import ScriptedModelServer
    from scripts.local_stack.aws import REGION

    from scripts.perf.aws_count import AwsCounter
    from scripts.perf.race import race
    from scripts.perf.scenarios import Bench, cpu_ratio

    counter = AwsCounter(state.aws_endpoint, REGION)
    # The functions' own log lines go nowhere (each measurement captures its own);
    # stdout is for the report.
    with quiet_stdout(), counter.installed(), ScriptedModelServer() as model:
        bench = Bench(state, counter, model)
        try:
            progress("this project: tools alone and whole turns")
            bench.run_cadencia()
            progress("Lab 87: tools alone and whole turns")
            bench.run_lab87()
            cpu = cpu_ratio(bench)
        finally:
            bench.close()
        model_lines = model_section(state, bench.results, cpu)
    progress(f"race: {processes} processes at one key, {rounds} rounds, both designs")
    races = race(state, processes=processes, rounds=rounds)
    return bench.results, races, cpu, model_lines


def model_section(state, results, cpu) -> list[str]:  # noqa: ANN001 - script wiring
    """The model's tokens, with and without prompt caching, priced with the status turn's AWS calls."""
    from cadencia_shared.ledger import Ledger
    from scripts.local_stack.aws import session_client
    from scripts.perf import model_report, pricing

    ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
    status_turn = next(m for m in results if (m.design, m.scenario, m.scope) == ("cadencia", "status", "turno"))
    rows = model_report.ratios(ledger, progress)
    ttl = model_report.ttl_rows(ledger, progress)
    return model_report.render(rows, ttl, pricing.per_million(status_turn), cpu["turn_ms"] / 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write-docs", action="store_true",
                        help="store the run in docs/results/bench.json and rewrite docs/performance.md's block")
    parser.add_argument("--rounds", type=int, default=10, help="race rounds (default 10)")
    parser.add_argument("--processes", type=int, default=50, help="racing processes per round (default 50)")
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters per import timing (>= 7)")
    parser.add_argument("--sem-assets", action="store_true",
                        help="skip building the assets (no sizes, no bytecode comparison)")
    args = parser.parse_args(argv)
    os.environ["POWERTOOLS_LOG_LEVEL"] = "INFO"  # what the stack deploys

    from scripts.local_stack import stack
    from scripts import doc_blocks
    from scripts.perf import imports, report, stored

    directory = tempfile.mkdtemp(prefix="cadencia-bench-")
    os.environ["CADENCIA_LOCAL_STACK_DIR"] = directory
    progress("starting a private local stack")
    state = stack.up(progress)
    try:
        results, races, cpu, model_lines = run_scenarios(state, args.rounds, args.processes)
    finally:
        from cadencia_shared import db

        db.close_all()
        left = stack.down(progress)
        if left:
            progress(f"left behind: {left}")
    progress(f"import times: {args.runs} fresh interpreters each")
    import_rows = imports.measure_all(runs=max(7, args.runs), progress=progress)
    assets = [] if args.sem_assets else imports.asset_sizes(progress)
    progress("bytecode: cold imports with and without .pyc on the runtime's Python")
    bytecode = [] if args.sem_assets else imports.bytecode_effect(runs=max(7, args.runs), progress=progress)
    markdown = report.render(results, races, cpu, import_rows, assets, bytecode, model_lines)
    print(markdown)
    if args.write_docs:
        run = stored.dump(results, races, cpu, import_rows, assets, bytecode, model_lines)
        for path in doc_blocks.store("bench", run):
            progress(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

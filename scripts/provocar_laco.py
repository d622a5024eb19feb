#!/usr/bin/env -S sh -c 'r="$(dirname "$(readlink -f "$0")")/.."; [ -x "$r/.venv/bin/python" ] || bash "$r/scripts/setup.sh" >&2 || exit 1; exec "$r/.venv/bin/python" "$0" "$@"'
"""provocar_laco.py — provoke the loop against one architecture, count real debits.

    provocar_laco.py --arquitetura minima|producao --cenario FILE --saida FILE
                     [--modelo roteirizado|<claude model id>] [--provedor anthropic|bedrock]
                     [--seed N] [--alvo local|aws] [--limite-plataforma 20] [--canal direto|whatsapp]

Writes FILE (a JSON array of attempt records; Lab 87's jq line works on it) and
FILE with ``.resumo.json`` (the figures, real debits counted at the gateway).
On the local target a run starts from an empty ledger and gateway, with the
ERP rows of the scenario created fresh. Exit codes: 0 ok, 2 bad input (nothing
ran), 3 duplicate debits in the production design, 4 the model did not answer (the
cause is printed: the SDK's error class, e.g. APIConnectionError or AuthenticationError).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "functions"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402

from scripts.harness import report  # noqa: E402
from scripts.harness.scenario import ScenarioError, load  # noqa: E402

SCRIPTED = "roteirizado"
console = Console(width=None if sys.stdout.isatty() else 132)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arquitetura", dest="architecture", choices=("minima", "producao"), required=True)
    p.add_argument("--cenario", dest="scenario_file", metavar="CENARIO", type=Path, required=True,
                   help="JSONL scenario file")
    p.add_argument("--saida", dest="output", metavar="SAIDA", type=Path, required=True,
                   help="where to write the attempt records (JSON array)")
    p.add_argument("--modelo", dest="model", metavar="MODELO", default=SCRIPTED,
                   help="'roteirizado' (default: the scripted insistent model) or a Claude model id")
    p.add_argument("--provedor", dest="provider", choices=("anthropic", "bedrock"), default="anthropic",
                   help="with a Claude model id: the Anthropic API (ANTHROPIC_API_KEY) or Bedrock (AWS credentials)")
    p.add_argument("--seed", type=int, default=87)
    p.add_argument("--alvo", dest="target", choices=("local", "aws"), default="local",
                   help="local stack (default) or a deployed stack, found by its CloudFormation outputs")
    p.add_argument("--stack", default="CadenciaAgente", help="CloudFormation stack name (--alvo aws)")
    p.add_argument("--limite-plataforma", dest="platform_limit", metavar="LIMITE_PLATAFORMA", type=int, default=20,
                   help="minimal design: model calls per customer message before the platform cuts the run")
    p.add_argument("--detalhado", dest="verbose", action="store_true", help="show the Lambdas' INFO logs")
    p.add_argument("--canal", dest="channel", choices=("direto", "whatsapp"), default="direto",
                   help="production design: invoke the orchestrator directly (default) or send every customer "
                        "message through the WhatsApp channel (signed webhook, queue, consumer; local only)")
    return p.parse_args(argv)


def _model_env(args: argparse.Namespace, scripted_url: str | None) -> dict[str, str]:
    if scripted_url:
        return {"MODEL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": scripted_url, "MODEL_ID": SCRIPTED,
                "ANTHROPIC_API_KEY": "local-scripted-model"}
    if args.provider == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        raise SystemExit("--modelo with --provedor anthropic needs ANTHROPIC_API_KEY in the environment")
    env = {"MODEL_PROVIDER": args.provider, "MODEL_ID": args.model}
    if args.provider == "anthropic":
        env["ANTHROPIC_API_KEY"] = os.environ["ANTHROPIC_API_KEY"]
        if os.environ.get("ANTHROPIC_BASE_URL"):  # a proxy or gateway in front of the API
            env["ANTHROPIC_BASE_URL"] = os.environ["ANTHROPIC_BASE_URL"]
    return env


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Before any Lambda module is imported: Powertools reads the level at import.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "INFO" if args.verbose else "WARNING")
    try:
        scenarios = load(args.scenario_file)
    except ScenarioError as err:
        console.print(f"[red]scenario rejected, nothing ran:[/]\n{err}")
        return 2
    if args.target == "aws":
        from scripts.harness.deployed import run_deployed

        return run_deployed(args, scenarios, console)

    from scripts.harness.local_run import run_local
    from scripts.harness.model_check import ModelFailure, check_model

    try:
        if args.model != SCRIPTED:
            check_model(_model_env(args, None))
        summary, records = run_local(args, scenarios, console, _model_env, SCRIPTED)
    except ModelFailure as err:
        console.print(f"[red]the model did not answer, no figures written:[/] {escape(str(err))}", highlight=False)
        return 4
    args.output.write_text(json.dumps(records, ensure_ascii=False, indent=2))
    report.summary_path(args.output).write_text(json.dumps(summary, ensure_ascii=False, indent=2))
    report.print_summary(console, [summary])
    console.print(f"wrote {args.output} ({len(records)} attempt records) and {report.summary_path(args.output)}")
    if args.architecture == "producao" and summary["figuras"]["debitos_duplicados"]:
        console.print("[red]production design made duplicate debits[/]")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())

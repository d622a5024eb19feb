#!/usr/bin/env bash
# limpeza.sh -- ordered teardown, in Lab 87's order, with every step verified:
#   1) the functions and their roles, 2) the database users (sql/revoke.sql),
#   3) the rest of the stack, 4) the retained ledger table, which must then answer
#   DescribeTable with ResourceNotFoundException (not "Count: 0").
#
#   scripts/limpeza.sh --dry-run                 print the AWS plan, change nothing
#   scripts/limpeza.sh --yes [-c key=value ...]  tear down the AWS stack (pass the
#                                                same -c values the deploy used)
#   scripts/limpeza.sh --local --yes             the same steps on the local stack
#                                                (.local-stack/state.json), then stop it
#
# Without --yes it only prints the plan and exits 2. The logic lives in
# infra/teardown.py (the local stack's part in scripts/local_teardown.py: infra
# never imports the development harness); docs/infrastructure.md explains each step.
set -euo pipefail
cd "$(dirname "$0")/.."
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
PY=.venv/bin/python
[ -x "$PY" ] || { echo "limpeza.sh: run scripts/setup.sh first (no .venv)" >&2; exit 1; }
module=infra.teardown
for arg in "$@"; do [ "$arg" = "--local" ] && module=scripts.local_teardown; done
PYTHONPATH=".:functions${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m "$module" "$@"

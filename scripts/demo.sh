#!/usr/bin/env bash
# One refund end to end through the tool handlers on the local stack:
# the first call debits the gateway, the repeat is blocked by idempotency.
# A stack this script starts is stopped when it ends — normally, on a failure or on
# Ctrl-C; one that was already running is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYTHONPATH="$PWD:$PWD/functions" POWERTOOLS_LOG_LEVEL=${POWERTOOLS_LOG_LEVEL:-WARNING}
PY=.venv/bin/python

if ! $PY -m scripts.local_stack status >/dev/null 2>&1; then
  # Set before `up`, so a start that is interrupted half-way is taken down too.
  trap '$PY -m scripts.local_stack down' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  $PY -m scripts.local_stack up
fi
$PY -m scripts.demo_refund "$@"

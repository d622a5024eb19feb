#!/usr/bin/env bash
# One refund end to end through the tool handlers on the local stack:
# the first call debits the gateway, the repeat is blocked by idempotency.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYTHONPATH="$PWD:$PWD/functions" POWERTOOLS_LOG_LEVEL=${POWERTOOLS_LOG_LEVEL:-WARNING}
exec .venv/bin/python -m scripts.demo_refund "$@"

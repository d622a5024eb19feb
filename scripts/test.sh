#!/usr/bin/env bash
# The whole test suite, on a fresh machine: set-up first (idempotent), the import
# contracts (lint-imports), then pytest.
# Extra arguments go to pytest (e.g. `scripts/test.sh -k ledger -x`); the quick unit layer,
# which needs no local stack: `scripts/test.sh -m "not stack and not infra"` (docs/testing.md).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
# Architecture contracts (.importlinter): layers, tool independence, no model SDK in
# tools, infra independent of scripts. A broken contract fails the run before pytest.
PYTHONPATH="$PWD:$PWD/functions" .venv/bin/lint-imports --no-cache || exit 1
.venv/bin/python -m pytest "$@"
rc=$?
# pytest exits 5 when it collected no tests: that is a failure here, never a pass.
if [ "$rc" = 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi
exit "$rc"

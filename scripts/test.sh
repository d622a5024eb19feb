#!/usr/bin/env bash
# The whole test suite, on a fresh machine: set-up first (idempotent), then pytest.
# Extra arguments go to pytest (e.g. `scripts/test.sh -k ledger -x`).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
.venv/bin/python -m pytest "$@"
rc=$?
# pytest exits 5 when it collected no tests: that is a failure here, never a pass.
if [ "$rc" = 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi
exit "$rc"

#!/usr/bin/env bash
# The whole test suite, on a fresh machine: set-up first (idempotent), the import
# contracts (lint-imports), the linter (ruff) and the type checker (mypy), then pytest.
# Extra arguments go to pytest (e.g. `scripts/test.sh -k ledger -x`); the quick unit layer,
# which needs no local stack: `scripts/test.sh -m "not stack and not infra"` (docs/testing.md).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
# Architecture contracts (.importlinter): layers, tool independence, no model SDK in
# tools, infra independent of scripts. A broken contract fails the run before pytest.
PYTHONPATH="$PWD:$PWD/functions" .venv/bin/lint-imports --no-cache || exit 1
# Lint and types (pyproject.toml: [tool.ruff], [tool.mypy]; docs/architecture.md, "Lint and types"): a finding of either
# fails the run before pytest, with one line saying which.
.venv/bin/ruff check --quiet orchestrator functions infra scripts tests \
  || { echo "scripts/test.sh: ruff found lint findings (above); run: .venv/bin/ruff check orchestrator functions infra scripts tests" >&2; exit 1; }
.venv/bin/mypy \
  || { echo "scripts/test.sh: mypy found type errors (above); run: .venv/bin/mypy" >&2; exit 1; }
.venv/bin/python -m pytest "$@"
rc=$?
# pytest exits 5 when it collected no tests: that is a failure here, never a pass.
if [ "$rc" = 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi
exit "$rc"

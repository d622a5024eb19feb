#!/usr/bin/env bash
# Mutation testing of the money path with mutmut 3 (configuration: [tool.mutmut] in pyproject.toml):
#   functions/emitir_reembolso/logic.py (+ the refund state machine when present), the retry ceiling gate
#   (orchestrator/gates.py) and the claim store (the claim functions of functions/cadencia_shared/ledger.py).
# Each mutant runs only the money tests that cover it, against ONE local stack started here and reused by
# every pytest run (CADENCIA_TEST_STACK_DIR, see tests/conftest.py). Too slow for scripts/test.sh: run it by hand.
#
#   scripts/mutacao.sh                 # every money-path mutant, 2 workers
#   MUTMUT_CHILDREN=4 scripts/mutacao.sh
#   scripts/mutacao.sh 'emitir_reembolso.logic.*'     # only these mutants (mutmut's fnmatch names)
#
# Prints mutmut's summary, then writes mutants/resultado.txt (one line per mutant and its status).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2

# The claim store is the claims part of ledger.py: mutants of the conversation/inbound/audit code are not run.
CLAIM_STORE=(
  'cadencia_shared.ledger.x_refund_idempotency_key__mutmut_*'
  'cadencia_shared.ledger.xǁRefundClaimǁ*'
  'cadencia_shared.ledger.xǁLedgerǁget_claim__mutmut_*'
  'cadencia_shared.ledger.xǁLedgerǁclaim_refund__mutmut_*'
  'cadencia_shared.ledger.xǁLedgerǁretake_claim__mutmut_*'
  'cadencia_shared.ledger.xǁLedgerǁsettle_claim__mutmut_*'
  'cadencia_shared.ledger.xǁLedgerǁmark_erp_updated__mutmut_*'
)
if [ "$#" -gt 0 ]; then PATTERNS=("$@"); else
  PATTERNS=('emitir_reembolso.*' 'orchestrator.gates.*' "${CLAIM_STORE[@]}"); fi

stack_dir=$(mktemp -d)
export CADENCIA_TEST_STACK_DIR="$stack_dir/stack" CADENCIA_LOCAL_STACK_DIR="$stack_dir/stack"
cleanup() { .venv/bin/python -m scripts.local_stack down >&2 || true; rm -rf "$stack_dir"; }
trap cleanup EXIT
.venv/bin/python -m scripts.local_stack up >&2

rm -rf mutants
started=$(date +%s)
.venv/bin/mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "${PATTERNS[@]}" >&2 || true
.venv/bin/mutmut results --all true > mutants/resultado.txt || true
echo "mutmut: $(( $(date +%s) - started )) s; per-mutant status in mutants/resultado.txt"
.venv/bin/python scripts/mutation_score.py mutants/resultado.txt "${PATTERNS[@]}"

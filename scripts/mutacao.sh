#!/usr/bin/env bash
# Mutation testing of the money path with mutmut 3 (configuration: [tool.mutmut] in pyproject.toml):
#   functions/emitir_reembolso/logic.py (+ the refund state machine when present), the retry ceiling gate
#   (RetryCeiling in orchestrator/controls.py) and the claim store (functions/cadencia_shared/ledger/claims.py and the
#   claim keys of ledger/table.py).
# Each mutant runs only the money tests that cover it, against ONE local stack started here and reused by
# every pytest run (CADENCIA_TEST_STACK_DIR, see tests/conftest.py). Too slow for scripts/test.sh: run it by hand.
#
#   scripts/mutacao.sh                 # every money-path mutant, 2 workers
#   MUTMUT_CHILDREN=4 scripts/mutacao.sh
#   scripts/mutacao.sh 'emitir_reembolso.logic.*'   # only these mutants (mutmut's fnmatch names)
#   MUTACAO_RETOMAR=1 scripts/mutacao.sh …          # keep the last run: mutmut re-runs what changed or is unchecked
#
# mutmut runs in .mutacao/ (git-ignored): the packages of functions/ at its root (as in a Lambda bundle, so
# mutant names match the imported modules), orchestrator/, scripts/, sql/, tests/, pyproject.toml.
# Prints the score per module and every mutant not killed; .mutacao/mutants/resultado.txt has every status.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2

# The claim store is the ledger's claims module and the claim keys of its table module: mutants of the
# conversation/inbound/attempt/audit modules are not run.
L='cadencia_shared.ledger'
CLAIM_STORE=(
  "$L.table.x_refund_idempotency_key__mutmut_*" "$L.table.x_claim_pk__mutmut_*" "$L.claims.*"
)
if [ "$#" -gt 0 ]; then PATTERNS=("$@"); else
  PATTERNS=('emitir_reembolso.logic.*' 'emitir_reembolso.transitions.*' 'orchestrator.controls.xǁRetryCeilingǁ*'
            "${CLAIM_STORE[@]}"); fi

repo=$PWD
stack_dir=$(mktemp -d)
export CADENCIA_TEST_STACK_DIR="$stack_dir/stack" CADENCIA_LOCAL_STACK_DIR="$stack_dir/stack"
cleanup() { bash "$repo/scripts/local-stack" down >&2 || true; rm -rf "$stack_dir"; }
trap cleanup EXIT
bash scripts/local-stack up >&2

work=.mutacao
[ -n "${MUTACAO_RETOMAR:-}" ] || rm -rf "$work"
mkdir -p "$work"
for src in functions/*/ orchestrator/ scripts/ sql/ tests/; do
  rm -rf "$work/$(basename "$src")" && cp -a "$src" "$work/$(basename "$src")"
done
find "$work" -name __pycache__ -prune -exec rm -rf {} +
cp pyproject.toml "$work/"
cd "$work"
started=$(date +%s)
"$repo/.venv/bin/mutmut" run --max-children "${MUTMUT_CHILDREN:-2}" "${PATTERNS[@]}" >&2 || true
"$repo/.venv/bin/mutmut" results --all true > mutants/resultado.txt || true
echo "mutmut: $(( $(date +%s) - started )) s; per-mutant status in $work/mutants/resultado.txt"
"$repo/.venv/bin/python" "$repo/scripts/mutation_score.py" mutants/resultado.txt "${PATTERNS[@]}"

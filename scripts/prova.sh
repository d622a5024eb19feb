#!/usr/bin/env bash
# prova.sh -- reproduces, on purpose, a malformed reasoning that insists on the
# same tool, against BOTH designs, and counts how many REAL debits each made at
# the payment gateway. No conclusion here comes from "it looks like it blocked".
#
#   scripts/prova.sh [SCENARIO.jsonl] [--seed N] [--canal whatsapp]
#
# --canal whatsapp: the production round sends every customer message through the
# WhatsApp channel (signed webhook, ingress, SQS FIFO, the orchestrator's queue
# consumer, reply to the fake Cloud API) instead of invoking the orchestrator.
#
# Brings the local stack up, runs the minimal design (Figure 1: one broad role,
# no ceiling, no idempotency) and the production design (Figure 2: the real
# orchestrator and tool Lambdas), writes resultado-minima.json,
# resultado-producao.json (+ .resumo.json) and resultado-comparacao.png in
# resultados/, prints the comparison, then (round 3) runs a tool whose Lambda keeps
# failing through the production design (resultado-disjuntor.json), then the
# approvals section (scripts/prova_aprovacoes.py), and brings the stack down. Exits
# non-zero if the production design made any duplicate debit, if the failing tool
# was called more than the breaker's N times, or if an approvals figure differs.
set -euo pipefail
cd "$(dirname "$0")/.."

CENARIO=scripts/cenarios/cenario-reformulacao-ambigua.jsonl
EXTRA=()
CANAL=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) EXTRA+=(--seed "$2"); shift 2 ;;
    --canal) CANAL=(--canal "$2"); shift 2 ;;
    *.jsonl) CENARIO=$1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: scripts/prova.sh [SCENARIO.jsonl] [--seed N] [--canal whatsapp]" >&2; exit 2 ;;
  esac
done
OUT=${PROVA_SAIDA:-resultados}

bash scripts/setup.sh
export PYTHONPATH="$PWD:$PWD/functions" POWERTOOLS_LOG_LEVEL=${POWERTOOLS_LOG_LEVEL:-WARNING}
PY=.venv/bin/python
mkdir -p "$OUT"

# A stack this script started is stopped on any exit; one that was already running is left alone.
if ! $PY -m scripts.local_stack status >/dev/null 2>&1; then
  $PY -m scripts.local_stack up
  trap '$PY -m scripts.local_stack down' EXIT
fi

# -- Round 1: minimal architecture (Figure 1) ----------------------------------
$PY scripts/provocar_laco.py --arquitetura minima --cenario "$CENARIO" \
  --saida "$OUT/resultado-minima.json" "${EXTRA[@]}"

# -- Round 2: production architecture (Figure 2), ceiling=4 + idempotency -------
set +e
$PY scripts/provocar_laco.py --arquitetura producao --cenario "$CENARIO" \
  --saida "$OUT/resultado-producao.json" "${EXTRA[@]}" "${CANAL[@]}"
prod=$?
set -e
[ "$prod" = 0 ] || [ "$prod" = 3 ] || exit "$prod"

# Lab 87's check, unchanged (jq when installed, the same query in Python otherwise).
echo
echo "jq '.[] | select(.tentativaNumero > 1) | .resultado' resultado-producao.json | sort | uniq -c"
if command -v jq >/dev/null; then
  jq '.[] | select(.tentativaNumero > 1) | .resultado' "$OUT/resultado-producao.json" | sort | uniq -c
else
  $PY -c 'import json,sys,collections; c=collections.Counter(json.dumps(r["resultado"]) for r in json.load(open(sys.argv[1])) if r["tentativaNumero"]>1); [print(f"{n:7d} {k}") for k,n in sorted(c.items())]' "$OUT/resultado-producao.json"
fi
echo

$PY -m scripts.harness.comparar "$OUT/resultado-minima.json" "$OUT/resultado-producao.json" \
  --grafico "$OUT/resultado-comparacao.png"

# -- Round 3: a tool whose Lambda keeps failing (injected): the circuit breaker --
echo
$PY -m scripts.harness.disjuntor --saida "$OUT/resultado-disjuntor.json" "${EXTRA[@]}"

# -- Approvals: refunds above R$ 500 with no approver, then one approved -----
# A section of its own (the rounds above keep their figures): its own orders, debits
# counted on the gateway; non-zero when any figure differs from the expected one.
echo
$PY -m scripts.prova_aprovacoes

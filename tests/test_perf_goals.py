"""The benchmark's goals table reads a sealed tool alone truthfully: the duplicate refund's
"1 read" is counted beside the edge's checks (SEAL's one-call turn, the kill switch read
again), and only when that turn's writes are there."""

from __future__ import annotations

from collections import Counter

import pytest

from scripts.perf.measure import Measurement
from scripts.perf.report import goals_table

TABLE = "cadencia-agente-execucoes"


def _duplicate_tool(calls: dict[str, int], sealed_writes: tuple[str, ...]) -> Measurement:
    m = Measurement("cadencia", "reembolso_duplicado", "ferramenta", lambda_requests=1)
    m.aws.calls = Counter({"lambda.Invoke": 1, **calls})
    m.aws.by_item = {f"{TABLE}: {kind}": [1, 1.0, 0.0] for kind in sealed_writes}
    return m


def _row(dup_tool: Measurement) -> str:
    filler = [Measurement(design, scenario, scope, lambda_requests=1)
              for design in ("cadencia", "lab87")
              for scenario in ("status", "primeiro_reembolso", "reembolso_duplicado", "recusa_pelo_teto")
              for scope in ("ferramenta", "turno")
              if (design, scenario, scope) != ("cadencia", "reembolso_duplicado", "ferramenta")]
    return next(line for line in goals_table([dup_tool, *filler]) if line.startswith("| duplicate refund (tool)"))


SEALED = ("sessao PutItem", "sessao UpdateItem", "jti PutItem")
EDGE_CALLS = {"dynamodb.GetItem": 2, "dynamodb.PutItem": 2, "dynamodb.UpdateItem": 1}


def test_the_tools_one_read_beside_the_edges_checks_meets_the_goal():
    row = _row(_duplicate_tool({**EDGE_CALLS, "dynamodb.GetItem": 3}, SEALED))
    assert "| GetItem 1 / 0 | yes |" in row, row


@pytest.mark.parametrize(("calls", "writes"), [
    # a second read of its own
    ({**EDGE_CALLS, "dynamodb.GetItem": 4}, SEALED),
    # a write of its own
    ({**EDGE_CALLS, "dynamodb.GetItem": 3, "dynamodb.PutItem": 3}, SEALED),
    # the same counts, but no session was opened and closed: SEAL's share is not SEAL's
    ({**EDGE_CALLS, "dynamodb.GetItem": 3}, ("jti PutItem",)),
])
def test_anything_else_fails_the_goal(calls, writes):
    assert _row(_duplicate_tool(calls, writes)).endswith("| **no** |")

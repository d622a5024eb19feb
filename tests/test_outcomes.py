"""One enum for every ``resultado`` value (cadencia_shared.outcomes.Outcome).

Until the ledger and the tools switch to it, their older
constants must spell exactly the same strings: a value added or renamed on one
side only fails here."""

from __future__ import annotations

from cadencia_shared.ledger import AttemptResult
from cadencia_shared.outcomes import Outcome


def test_every_attempt_result_is_an_outcome_with_the_same_wire_string():
    for result in AttemptResult:
        assert Outcome(result.value).name == result.name, result


def test_the_outcomes_are_the_attempt_results_plus_what_the_read_and_update_tools_answer():
    assert {o.value for o in Outcome} == {r.value for r in AttemptResult} | {"consultado", "atualizado"}


def test_lab_87s_names_are_kept():
    assert (Outcome.EXECUTED, Outcome.BLOCKED_BY_IDEMPOTENCY, Outcome.BLOCKED_BY_CEILING) == (
        "executado", "bloqueado_por_idempotencia", "bloqueado_por_teto")

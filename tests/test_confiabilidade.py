"""scripts/confiabilidade.py --rapido: the figures themselves (read from its JSON),
not its printing. One run, in its own private stack, shared by the checks below."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CRASH_POINTS = {"after_claim", "after_secret", "during_gateway", "after_debit", "after_settle", "after_erp"}
RACES = {"other_amount", "retry_killed", "concurrent"}

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("confiabilidade") / "figuras.json"
    proc = subprocess.run([sys.executable, "scripts/confiabilidade.py", "--rapido", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    data = json.loads(out.read_text())
    data["_exit"] = proc.returncode
    data["_stdout"] = proc.stdout
    return data


def test_every_crash_point_is_a_real_sigkill_at_that_point(figures):
    crashes = {t["name"]: t for t in figures["crashes"]}
    assert set(crashes) == CRASH_POINTS
    for name, tally in crashes.items():
        assert tally["trials"] >= 1
        assert tally["seam_hits"] == tally["trials"], name  # died by SIGKILL, at that seam


def test_after_a_death_each_order_is_debited_exactly_once_and_every_party_agrees(figures):
    for tally in figures["crashes"]:
        assert tally["debit_counts"] == [1] * tally["trials"], tally
        assert tally["over_value"] == 0 and tally["consistent"] == tally["trials"], tally
        assert tally["verdicts"]["counts"].get("falsa", 0) == 0, tally["verdicts"]["false_answers"]
        # The customer got answers to judge (not only dead processes).
        assert tally["verdicts"]["counts"].get("verdadeira", 0) >= 3 * tally["trials"]


def test_racing_processes_never_refund_above_the_order(figures):
    storms = {t["name"]: t for t in figures["storms"]}
    assert storms["identical"]["debit_counts"] == [1]
    assert storms["conversations"]["debit_counts"] == [3]  # 3 x R$ 30 fit in R$ 100, a 4th does not
    assert all(t["over_value"] == 0 and t["consistent"] == 1 for t in storms.values())
    assert all(t["verdicts"]["counts"].get("falsa", 0) == 0 for t in storms.values())


def test_in_flight_race_never_refunds_above_the_order(figures):
    races = {t["name"]: t for t in figures["races"]}
    assert set(races) == RACES
    for name, tally in races.items():
        assert tally["over_value"] == 0, name
        assert tally["consistent"] == tally["trials"], (name, tally["notes"])
        assert tally["verdicts"]["counts"].get("falsa", 0) == 0, tally["verdicts"]["false_answers"]
    assert races["retry_killed"]["seam_hits"] == races["retry_killed"]["trials"]


def test_hostile_inputs_reach_every_handler_and_change_nothing(figures):
    rows = {h["tool"]: h for h in figures["hostile"]}
    assert set(rows) == {"consultar_status_pedido", "emitir_reembolso", "atualizar_cadastro"}
    for tool, row in rows.items():
        assert row["examples"] >= 50, tool
        assert row["counts"].get("rejeitada_na_borda", 0) > 0, tool  # the handler really answered
        assert row["counts"].get("quebra", 0) == 0, (tool, row["samples"])


def test_hostile_inputs_are_all_rejected_at_the_edge(figures):
    for row in figures["hostile"]:
        assert row["counts"].get("aceita", 0) == 0, (row["tool"], row["samples"])
        assert (row["rows_changed"], row["debits"], row["ledger_items_added"]) == (0, 0, 0), row["tool"]


def test_no_secret_in_any_output(figures):
    leaks = figures["leaks"]
    assert leaks["files"] > 50 and leaks["ledger_items"] > 0 and leaks["bytes_scanned"] > 10_000
    assert leaks["secrets_found"] == []


def test_no_personal_data_in_any_output(figures):
    assert figures["leaks"]["personal_values"] >= 10  # every customer's data, and what the updates sent
    assert figures["leaks"]["personal_found"] == []


def test_the_scheduled_reconciler_ran_in_the_retries(figures):
    # One pass after each death and each race: it exists on this code, so it must have run.
    assert figures["reconciler"] == "cadencia-conciliar-reembolsos"
    assert figures["reconciler_passes"] == figures["reconciler_passes_ok"] == len(CRASH_POINTS) + len(RACES)


def test_the_table_names_every_scenario_it_measured(figures):
    table = figures["_stdout"]
    assert table.startswith("Mode `rapido`")
    assert all(f"`{name}`" in table for name in CRASH_POINTS | RACES | {"identical", "conversations"})

"""``scripts/console`` for the tool kill switches, run as the operators' doc shows it
(the executable, the person's own token, the local API): a supervisor lists, stops and
restarts a tool; an approver is refused in one line and nothing changes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .test_operator_api import token
from .test_switches_api import REFUND, _item, api  # noqa: F401 - the fixture, reused

ROOT = Path(__file__).resolve().parents[1]


def _console(api_url: str, bearer: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CADENCIA_TOKEN": bearer, "CADENCIA_TOKEN_FILE": "/nonexistent/token"}
    return subprocess.run([str(ROOT / "scripts" / "console"), "--api", api_url, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_supervisor_stops_and_restarts_a_tool_from_the_console(local_stack, api):
    davi = token(api, "davi")
    listed = _console(api.url, davi, "listar", "interruptores")
    assert listed.returncode == 0, listed.stderr
    assert f"{REFUND:<30} ligada" in listed.stdout

    stopped = _console(api.url, davi, "interruptor", REFUND, "desligar", "--motivo", "gateway em manutenção")
    assert stopped.returncode == 0, stopped.stderr
    assert "antes: ligada" in stopped.stdout and "gateway em manutenção" in stopped.stdout
    assert _item(local_stack)["estado"] == "desligada"
    listed = _console(api.url, davi, "listar", "interruptores").stdout
    assert f"{REFUND:<30} desligada" in listed and all(len(line) <= 80 for line in listed.splitlines())

    started = _console(api.url, davi, "interruptor", REFUND, "ligar", "--motivo", "gateway normalizado")
    assert started.returncode == 0 and _item(local_stack)["estado"] == "ligada"


def test_an_approver_is_refused_in_one_line_and_nothing_changes(local_stack, api):
    refused = _console(api.url, token(api, "ana"), "interruptor", REFUND, "desligar", "--motivo", "não posso")
    assert refused.returncode == 1
    assert "grupo_nao_autorizado" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert _item(local_stack) is None

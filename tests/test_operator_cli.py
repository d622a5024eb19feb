"""The operator commands' shared start-up (scripts/operator_cli.py): a refused conversation id
exits 2 without echoing the value, a stopped local stack exits 3 with how to start it."""

from __future__ import annotations

import pytest

from scripts import operator_cli


@pytest.mark.parametrize("raw", ["conv 1", "conv-1\n", "", "x" * 300, "conv-1\u200b"])
def test_a_refused_conversation_id_exits_2_without_echoing_it(raw, capsys):
    with pytest.raises(SystemExit) as exited:
        operator_cli.conversation_argument(raw)
    assert exited.value.code == operator_cli.EXIT_INVALID_ARGUMENT
    err = capsys.readouterr().err
    assert err == "conversa: identificador inválido\n"


def test_a_valid_conversation_id_or_none_passes():
    assert operator_cli.conversation_argument("conv-1") == "conv-1"
    assert operator_cli.conversation_argument(None) is None


def test_a_stopped_local_stack_exits_3_with_how_to_start_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CADENCIA_LOCAL_STACK_DIR", str(tmp_path))  # no state.json: nothing running
    for start_up in (operator_cli.running_stack, lambda: operator_cli.dynamodb_client(local=True)):
        with pytest.raises(SystemExit) as exited:
            start_up()
        assert exited.value.code == operator_cli.EXIT_STACK_DOWN
        assert capsys.readouterr().err == f"{operator_cli.STACK_DOWN}\n"

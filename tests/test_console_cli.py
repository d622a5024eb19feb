"""scripts/console over the local operators' API: the person's own token, no name sent,
readable at 80 columns, one-line errors."""

from __future__ import annotations

import pytest

from scripts import console_api_cli

from .test_operator_api import USERS, _waiting, api  # noqa: F401 - the fixture, reused


@pytest.fixture
def cli(api, tmp_path, monkeypatch):
    monkeypatch.setattr(console_api_cli, "TOKEN_FILE", tmp_path / "token")
    monkeypatch.delenv("CADENCIA_TOKEN", raising=False)

    def run(*args: str, password: str | None = None) -> int:
        if args[0] == "entrar":
            return console_api_cli.login(console_api_cli.parse_args(["--api", api.url, *args, "--emissor",
                                                                     api.issuer.url]), password=password)
        return console_api_cli.main(["--api", api.url, *args])
    return run


def test_an_approver_signs_in_lists_and_approves_a_lower_amount(local_stack, erp, gateway, cli, capsys, tmp_path):
    conv, approval = _waiting(local_stack, 140.0)
    with pytest.raises(SystemExit, match="sem token"):  # refused before any request
        cli("listar")
    assert cli("entrar", "--usuario", "ana", password="errada") == 1
    assert "recusado" in capsys.readouterr().err
    assert cli("entrar", "--usuario", "ana", password=USERS["ana"].password) == 0
    assert (tmp_path / "token").stat().st_mode & 0o077 == 0
    capsys.readouterr()
    assert cli("listar") == 0
    # The in-process API's own JSON log lines share this stdout here; the tool's lines are the rest.
    listed = "\n".join(line for line in capsys.readouterr().out.splitlines() if not line.startswith("{"))
    assert approval in listed and conv not in listed
    assert all(len(line) <= 80 for line in listed.splitlines())
    assert cli("aprovar", approval, "--motivo", "conferido", "--valor", "200.00") == 1
    err = capsys.readouterr().err
    assert "valor_acima_do_pedido" in err and len(err.strip().splitlines()) == 1
    assert cli("aprovar", approval, "--motivo", "conferido", "--valor", "100.50") == 0
    assert "substituiu" in capsys.readouterr().out
    assert [d["valor"] for d in gateway.debits_for(conv)] == ["100.50"]


def test_an_attendant_cannot_decide(local_stack, erp, gateway, cli, capsys):
    conv, approval = _waiting(local_stack, 140.0)
    assert cli("entrar", "--usuario", "carla", password=USERS["carla"].password) == 0
    assert cli("aprovar", approval, "--motivo", "conferido") == 1
    assert "grupo_nao_autorizado" in capsys.readouterr().err
    assert gateway.debits_for(conv) == []

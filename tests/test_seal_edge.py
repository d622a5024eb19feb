"""SEAL at each tool's edge (docs/seal.md): a call the turn did not sign has no effect.

Each forged call goes to the real handler (its own environment, the real PostgreSQL and
gateway, the ledger on moto) the way a principal allowed ``lambda:InvokeFunction``
could send it, and must answer ``selo_recusado`` with its numeric code, with no gateway
debit, no business ledger item and no ERP row changed. Then a legitimate sealed call
succeeds, and two OS processes presenting one sealed refund debit once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.catalog import ATUALIZAR_CADASTRO, CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO
from cadencia_shared.ledger import Ledger, refund_idempotency_key
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore
from cadencia_shared.seal import seal

from .support.seal_harness import ledger_items, open_session

ROOT = Path(__file__).resolve().parents[1]
LIMIT = SessionLimits()  # the catalog's default: R$ 500 without a person's approval


def _conv() -> str:
    return f"selo-{uuid.uuid4().hex[:10]}"


def _erp(erp: Any) -> list[Any]:
    return [erp.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()  # noqa: S608 (fixed names)
            for t in ("clientes", "pedidos", "reembolsos")]


def _sealed(ledger: Ledger, tool: str, event: dict[str, Any], **kw: Any) -> dict[str, Any]:
    session = open_session(ledger, event["conversaId"], event["clienteId"], limits=LIMIT)
    return seal(event, tool=tool, session=session, now_ms=ledger.now_ms(), **kw)


def _forgeries(ledger: Ledger) -> list[tuple[str, Any, dict[str, Any], int]]:
    """(label, tool, event, expected code): the calls a principal could forge."""
    conv = _conv()
    refund = {"conversaId": conv, "clienteId": 1001, "pedidoId": "4821", "valor": 100.0}
    big = {**refund, "valor": 900.0}
    other_session = open_session(ledger, conv, 1001, limits=LIMIT)
    theirs = _sealed(ledger, EMITIR_REEMBOLSO.name, refund)
    borrowed = {**theirs, "selo": {**theirs["selo"], "sessao": other_session.session_id}}
    changed = {**_sealed(ledger, EMITIR_REEMBOLSO.name, refund), "valor": 150.0}
    expired = seal(refund, tool=EMITIR_REEMBOLSO.name, now_ms=ledger.now_ms(),
                   session=open_session(ledger, conv, 1001, limits=LIMIT, expires_at_ms=ledger.now_ms() - 1))
    closed_session = open_session(ledger, conv, 1001, limits=LIMIT)
    closed = seal(refund, tool=EMITIR_REEMBOLSO.name, session=closed_session, now_ms=ledger.now_ms())
    SessionStore(ledger.table).close_session(closed_session.session_id)
    never = seal({**refund, "conversaId": "conversa-que-nunca-existiu"}, tool=EMITIR_REEMBOLSO.name,
                 session=open_session(ledger, conv, 1001, limits=LIMIT), now_ms=ledger.now_ms())
    profile = {"conversaId": conv, "clienteId": 1001, "campos": {"email": "outro@example.com"}}
    other_profile = {**_sealed(ledger, ATUALIZAR_CADASTRO.name, profile), "clienteId": 1002}
    status = {"conversaId": conv, "clienteId": 1001, "pedidoId": "5100"}
    other_status = {**_sealed(ledger, CONSULTAR_STATUS_PEDIDO.name, status), "clienteId": 1002}
    return [
        ("R$ 900 with no envelope", EMITIR_REEMBOLSO, big, 1001),
        ("another session's envelope", EMITIR_REEMBOLSO, borrowed, 1005),
        ("arguments changed after signing", EMITIR_REEMBOLSO, changed, 2001),
        ("an expired session", EMITIR_REEMBOLSO, expired, 1004),
        ("a closed session", EMITIR_REEMBOLSO, closed, 1003),
        ("a conversation that never existed", EMITIR_REEMBOLSO, never, 2002),
        ("R$ 900 naming no approval", EMITIR_REEMBOLSO, _sealed(ledger, EMITIR_REEMBOLSO.name, big), 2004),
        ("R$ 900 naming an approval that binds nothing", EMITIR_REEMBOLSO,
         _sealed(ledger, EMITIR_REEMBOLSO.name, big, approval_id=uuid.uuid4().hex), 2005),
        ("another customer's e-mail", ATUALIZAR_CADASTRO, other_profile, 2003),
        ("another customer's order status", CONSULTAR_STATUS_PEDIDO, other_status, 2003),
    ]


def test_each_forged_call_is_refused_at_the_edge_with_no_effect(tools, gateway, erp, mocked_aws):
    ledger: Ledger = mocked_aws["ledger"]
    before, debits = _erp(erp), gateway.stats()["reembolso"]
    codes = {}
    for label, spec, event, expected in _forgeries(ledger):
        out = tools(spec, event, sealed=False)
        assert out["ok"] is False and out["erro"]["codigo"] == "selo_recusado", (label, out)
        codes[label] = out["erro"]["detalhes"]["codigo"]
        assert codes[label] == expected, label
        assert "dados" not in out
    assert gateway.stats()["reembolso"] == debits, "a forged call reached the gateway"
    assert _erp(erp) == before, "a forged call changed an ERP row"
    assert ledger_items(mocked_aws["dynamodb"]) == [], "a forged call wrote a business ledger item"
    # Control: the same refund, sealed by a turn's session, runs (one debit).
    legit = tools(EMITIR_REEMBOLSO, _sealed(ledger, EMITIR_REEMBOLSO.name,
                                            {"conversaId": _conv(), "clienteId": 1001, "pedidoId": "4821",
                                             "valor": 100.0}), sealed=False)
    assert legit["ok"] is True and legit["resultado"] == "executado"
    assert gateway.stats()["reembolso"] == debits + 1


def test_a_replayed_envelope_and_an_old_profile_event_have_no_second_effect(tools, gateway, erp, mocked_aws):
    ledger: Ledger = mocked_aws["ledger"]
    refund = _sealed(ledger, EMITIR_REEMBOLSO.name,
                     {"conversaId": _conv(), "clienteId": 1001, "pedidoId": "4821", "valor": 100.0})
    assert tools(EMITIR_REEMBOLSO, refund, sealed=False)["resultado"] == "executado"
    debits = gateway.stats()["reembolso"]
    again = tools(EMITIR_REEMBOLSO, refund, sealed=False)
    assert again["erro"]["codigo"] == "selo_recusado" and again["erro"]["detalhes"]["codigo"] == 1006
    assert gateway.stats()["reembolso"] == debits
    profile = _sealed(ledger, ATUALIZAR_CADASTRO.name,
                      {"conversaId": _conv(), "clienteId": 1001, "campos": {"email": "velho@example.com"}})
    assert tools(ATUALIZAR_CADASTRO, profile, sealed=False)["ok"] is True
    erp.execute("UPDATE clientes SET email = 'novo@example.com' WHERE id = 1001")
    replayed = tools(ATUALIZAR_CADASTRO, profile, sealed=False)
    assert replayed["erro"]["detalhes"]["codigo"] == 1006
    assert erp.execute("SELECT email FROM clientes WHERE id = 1001").fetchone()[0] == "novo@example.com"


_ENVELOPE_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40),
                             st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=8),
                                                                                  st.integers(), max_size=3))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(selo=st.one_of(_ENVELOPE_VALUES, st.dictionaries(
    st.sampled_from(["v", "sessao", "jti", "ferramenta", "argsSha256", "conversaId", "clienteId", "emitidoEm",
                     "expiraEm", "assinatura", "aprovacaoId", "extra"]), _ENVELOPE_VALUES, max_size=12)))
def test_arbitrary_envelopes_at_the_edge_are_typed_refusals_with_no_effect(tools, gateway, selo):
    debits = gateway.stats()["reembolso"]
    event = {"conversaId": "selo-hostil", "clienteId": 1001, "pedidoId": "4821", "valor": 100.0, "selo": selo}
    out = tools(EMITIR_REEMBOLSO, event, sealed=False)
    assert out["ok"] is False and out["erro"]["codigo"] == "selo_recusado"
    assert out["erro"]["detalhes"]["codigo"] in (1001, 1002, 1003)
    assert len(json.dumps(out)) < 1_000 and gateway.stats()["reembolso"] == debits


def test_two_processes_presenting_one_sealed_refund_debit_once(local_stack, gateway, erp):
    import boto3

    env = local_stack.aws_environment()
    ddb = boto3.client("dynamodb", region_name=env["AWS_REGION"], endpoint_url=env["AWS_ENDPOINT_URL"],
                       aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    ledger = Ledger(local_stack.ledger_table, ddb)
    conv = _conv()
    event = _sealed(ledger, EMITIR_REEMBOLSO.name,
                    {"conversaId": conv, "clienteId": 1001, "pedidoId": "4821", "valor": float(Decimal("100"))})
    child_env = {**os.environ, **local_stack.function_environment(EMITIR_REEMBOLSO),
                 "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'functions'}"}
    children = [subprocess.Popen([sys.executable, "-m", "tests.support.refund_process", json.dumps(event)],
                                 cwd=ROOT, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True) for _ in range(2)]
    answers = [json.loads(c.communicate(timeout=120)[0].strip().splitlines()[-1]) for c in children]
    outcomes = sorted(str(a.get("resultado") or a["erro"]["detalhes"].get("codigo")) for a in answers)
    assert outcomes == ["1006", "executado"]
    assert len(gateway.debits_for(refund_idempotency_key(conv, "4821"))) == 1

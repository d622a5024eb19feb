"""The tool kill switches on the operators' API, over real HTTP on the local stack:
the OpenID issuer's real JWTs, the API adapter, the decision function's handler.
Only a supervisor changes a switch; every refused request changes nothing; every
change is on the audit chain with who, why and when."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from pydantic import ValidationError

from cadencia_shared.audit_chain import AUDIT_TABLE, NO_CONVERSATION, AuditChain
from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import Ledger, switch_pk
from decidir_aprovacao.switches_api import SWITCH_CHANGED_EVENT, SwitchChange
from scripts.local_stack import console_api
from scripts.local_stack.aws import session_client

from .test_operator_api import USERS, call, token

REFUND = "emitir_reembolso"


def _ledger(local_stack) -> Ledger:
    return Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))


def _forget_switches(local_stack) -> None:
    ledger = _ledger(local_stack)
    for tool in TOOLS:
        ledger.client.delete_item(TableName=ledger.table_name, Key={"pk": {"S": switch_pk(tool)}})


@pytest.fixture
def api(local_stack, tmp_path) -> Iterator[console_api.ConsoleApi]:
    """The API, with no switch set before or after (the local stack is shared by the session)."""
    _forget_switches(local_stack)
    served = console_api.serve(local_stack, key_file=tmp_path / "chave.pem")
    try:
        yield served
    finally:
        served.close()
        _forget_switches(local_stack)


def _item(local_stack, tool: str = REFUND) -> dict[str, Any] | None:
    return _ledger(local_stack).table.get(switch_pk(tool))


def _changes(local_stack) -> list[dict[str, Any]]:
    client = session_client("dynamodb", local_stack.aws_endpoint)
    records = AuditChain(AUDIT_TABLE, client, anchor_table=local_stack.ledger_table).records(NO_CONVERSATION)
    return [json.loads(r["detalhes"]) for r in records if r["evento"] == SWITCH_CHANGED_EVENT]


def test_a_supervisor_stops_and_restarts_a_tool_and_each_change_is_audited(local_stack, api):
    davi = token(api, "davi")
    before = len(_changes(local_stack))
    status, body = call(api, "POST", f"/interruptores/{REFUND}", bearer=davi,
                        body={"estado": "desligada", "motivo": "gateway em manutenção"})
    assert status == 200 and body["estadoAnterior"] == "ligada"
    assert (body["interruptor"]["estado"], body["interruptor"]["pessoaSub"], body["interruptor"]["motivo"]) == (
        "desligada", USERS["davi"].sub, "gateway em manutenção")
    assert not _ledger(local_stack).tool_switch(REFUND).running

    status, body = call(api, "GET", "/interruptores", bearer=davi)
    assert status == 200
    listed = {s["ferramenta"]: s["estado"] for s in body["interruptores"]}
    assert listed == {name: ("desligada" if name == REFUND else "ligada") for name in TOOLS}

    status, _ = call(api, "POST", f"/interruptores/{REFUND}", bearer=davi,
                     body={"estado": "ligada", "motivo": "gateway normalizado"})
    assert status == 200 and _ledger(local_stack).tool_switch(REFUND).running
    changes = _changes(local_stack)[before:]
    assert [(c["ferramenta"], c["estadoAnterior"], c["estado"], c["motivo"], c["pessoaSub"], c["via"])
            for c in changes] == [
        (REFUND, "ligada", "desligada", "gateway em manutenção", USERS["davi"].sub, "api"),
        (REFUND, "desligada", "ligada", "gateway normalizado", USERS["davi"].sub, "api")]
    assert all(c["alteradoEm"] and c["pessoaNome"] for c in changes)


def test_a_person_outside_the_supervisors_gets_403_and_nothing_changes(local_stack, api):
    before = len(_changes(local_stack))
    for login in ("ana", "carla"):  # an approver, an attendant
        bearer = token(api, login)
        status, body = call(api, "POST", f"/interruptores/{REFUND}", bearer=bearer,
                            body={"estado": "desligada", "motivo": "não sou supervisora"})
        assert (status, body["erro"]["codigo"]) == (403, "grupo_nao_autorizado"), login
        assert call(api, "GET", "/interruptores", bearer=bearer)[0] == 403
    status, _ = call(api, "POST", f"/interruptores/{REFUND}", bearer=None,
                     body={"estado": "desligada", "motivo": "sem token"})
    assert status == 401
    assert _item(local_stack) is None and len(_changes(local_stack)) == before


def test_an_unknown_tool_is_a_typed_404_and_nothing_changes(local_stack, api):
    before = len(_changes(local_stack))
    status, body = call(api, "POST", "/interruptores/apagar_tudo", bearer=token(api, "davi"),
                        body={"estado": "desligada", "motivo": "não existe"})
    assert (status, body["erro"]["codigo"]) == (404, "ferramenta_inexistente")
    assert _item(local_stack, "apagar_tudo") is None and len(_changes(local_stack)) == before


def test_an_actor_in_the_body_is_refused(local_stack, api):
    davi = token(api, "davi")
    for actor in ("supervisor", "pessoaSub"):
        status, body = call(api, "POST", f"/interruptores/{REFUND}", bearer=davi,
                            body={"estado": "desligada", "motivo": "gateway", actor: "outra"})
        assert status == 400 and body["erro"]["codigo"] in ("ator_no_corpo", "entrada_invalida"), actor
    assert _item(local_stack) is None


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40))
_HOSTILE = st.one_of(
    st.dictionaries(st.text(max_size=12), _SCALARS, max_size=4),
    st.fixed_dictionaries({"estado": _SCALARS, "motivo": _SCALARS}),
    st.fixed_dictionaries({"estado": st.sampled_from(["desligada", "ligada"]),
                           "motivo": st.one_of(st.text(max_size=2), st.text(min_size=501, max_size=600),
                                               st.just("duas\nlinhas"), st.just("   "), _SCALARS)}),
    st.fixed_dictionaries({"estado": st.just("desligada"), "motivo": st.just("manutenção")},
                          optional={"extra": _SCALARS, "decisao": _SCALARS, "pessoaNome": _SCALARS}).filter(
        lambda body: len(body) > 2),
)


def _valid(body: dict[str, Any]) -> bool:
    try:
        SwitchChange.model_validate(body, strict=True)
    except ValidationError:
        return False
    return True


def test_hostile_bodies_get_400_and_change_nothing(local_stack, api):
    davi = token(api, "davi")
    before = len(_changes(local_stack))

    @hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_HOSTILE.filter(lambda body: not _valid(body)))
    def hostile(body: dict[str, Any]) -> None:
        status, answer = call(api, "POST", f"/interruptores/{REFUND}", bearer=davi, body=body)
        assert status == 400 and answer["ok"] is False, body
        assert _item(local_stack) is None

    hostile()
    assert len(_changes(local_stack)) == before

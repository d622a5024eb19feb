"""Who is acting, from the authorizer's claims only (cadencia_shared.identity): the
claim shapes API Gateway hands over, hostile claims and bodies never crash and never
grant a group."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cadencia_shared.identity import (
    APPROVERS,
    ATTENDANTS,
    IdentityRefused,
    groups_of,
    is_api_event,
    json_body,
    person_from_event,
)

SUB = "0d4c1a8e-8f1e-4a51-9c2e-7a0f3c9b1e22"


def _event(claims=None, body=None):
    context = {"http": {"method": "POST"}}
    if claims is not None:
        context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return {"version": "2.0", "routeKey": "POST /x", "requestContext": context, "body": body}


def test_groups_arrive_as_api_gateway_renders_them():
    assert groups_of("[aprovadores atendentes]") == {APPROVERS, ATTENDANTS}
    assert groups_of(["aprovadores"]) == {APPROVERS}
    assert groups_of("aprovadores") == {APPROVERS}
    assert groups_of("[administradores aprovadores-falsos]") == frozenset()
    assert groups_of(None) == frozenset() and groups_of(7) == frozenset()


def test_the_person_is_the_claims_and_only_the_claims():
    person = person_from_event(_event({"sub": SUB, "username": "ana", "cognito:groups": "[aprovadores]"},
                                      body=json.dumps({"aprovador": "bruno"})))
    assert (person.subject, person.name, person.groups) == (SUB, "ana", {APPROVERS})
    for claims in (None, {}, {"sub": ""}, {"sub": "Ana Maria"}, {"sub": 5}, {"sub": SUB + "\n"}):
        with pytest.raises(IdentityRefused) as refused:
            person_from_event(_event(claims))
        assert refused.value.status == 401
    assert not is_api_event({"acao": "decidir"}) and is_api_event(_event())


def test_an_actor_in_the_body_is_refused():
    for field in ("aprovador", "atendente", "autor", "decididoPor", "sub"):
        with pytest.raises(ValueError, match="ator_no_corpo"):
            json_body(_event(body=json.dumps({"texto": "oi", field: "x"})))
    for raw in ("[1]", "null", "{", "x" * 40_000, 5):
        with pytest.raises(ValueError, match="corpo_invalido"):
            json_body(_event(body=raw))


@given(claims=st.dictionaries(st.text(max_size=20), st.one_of(st.text(max_size=40), st.integers(), st.none(),
                                                                 st.lists(st.text(max_size=15), max_size=4)),
                              max_size=6))
def test_hostile_claims_never_crash_and_never_grant_a_group_not_named(claims):
    try:
        person = person_from_event(_event(claims))
    except IdentityRefused as refused:
        assert refused.status == 401
        return
    named = claims.get("cognito:groups")
    assert person.groups <= groups_of(named)
    assert person.subject == claims["sub"] and len(person.name) <= 80


@given(body=st.text(max_size=300))
def test_hostile_bodies_are_an_object_or_a_typed_refusal(body):
    try:
        parsed = json_body(_event(body=body))
    except ValueError as err:
        assert str(err) in ("corpo_invalido", "ator_no_corpo")
        return
    assert isinstance(parsed, dict)

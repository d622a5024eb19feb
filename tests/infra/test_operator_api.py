"""The operators' HTTP API on the synthesized template: every route behind the JWT
authorizer of the operators' user pool (MFA required), the functions' resource
policies exactly the rows of infra/operator_contract.py, and — standing in for API
Gateway — events built from the TEMPLATE's routes handed to the handler each route's
integration names: no verified person 401, a person outside the group 403, an actor
in the body 400. Nothing here reaches AWS (an unreachable endpoint would fail loudly)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from cadencia_shared.identity import APPROVERS, ATTENDANTS, GROUPS, SUPERVISORS
from infra import operator_contract
from infra.contract import Ids
from orchestrator.api_routes import AUTH_COOKIE, AUTH_JWT, AUTH_NONE, CONSOLE_ROUTES, ROUTES, ApiRoute
from orchestrator.invokers.local import LocalContext
from scripts.local_stack.api_adapter import api_event

pytestmark = pytest.mark.infra
ROOT = Path(__file__).resolve().parents[2]
# The group a route's function checks, by the function's handler.
GROUP_OF_HANDLER = {"decidir_aprovacao.handler.lambda_handler": APPROVERS,
                    "orchestrator.human_reply_handler.lambda_handler": ATTENDANTS}
SAMPLE_PARAMS = {"aprovacaoId": "a" * 32, "conversaId": "conversa-de-teste-1", "ferramenta": "emitir_reembolso"}
# Routes of a function whose group is not the function's own (the decision function also
# serves the tool kill switches, for supervisors).
GROUP_OF_ROUTE_PREFIX = {"/interruptores": SUPERVISORS}
SAMPLE_BODY = {"decisao": {"decisao": "aprovar", "justificativa": "conferido"},
               "interruptores": {"estado": "desligada", "motivo": "conferido"}}


def _group(route: dict[str, Any]) -> str:
    path = route["route_key"].split(" ", 1)[1]
    found = [group for prefix, group in GROUP_OF_ROUTE_PREFIX.items() if path.startswith(prefix)]
    return found[0] if found else GROUP_OF_HANDLER[route["handler"]]


def _body(route_key: str) -> dict[str, Any] | None:
    for marker, body in SAMPLE_BODY.items():
        if marker in route_key:
            return body if route_key.startswith("POST ") else None
    return {"texto": "Oi"} if route_key.startswith("POST ") else None


def _of_type(synth, kind: str) -> dict[str, Any]:
    return synth.of_type(kind)


def _template_routes(synth) -> list[dict[str, Any]]:
    """(route key, authorizer, the handler its integration invokes) from the template only."""
    resources = synth.resources
    found = []
    for route in _of_type(synth, "AWS::ApiGatewayV2::Route").values():
        props = route["Properties"]
        integration_id = props["Target"]["Fn::Join"][1][1]["Ref"]
        function_id = resources[integration_id]["Properties"]["IntegrationUri"]["Fn::GetAtt"][0]
        found.append({"route_key": props["RouteKey"], "authorization": props.get("AuthorizationType"),
                      "authorizer": props.get("AuthorizerId", {}).get("Ref"),
                      "function_id": function_id,
                      "handler": resources[function_id]["Properties"]["Handler"],
                      "function_name": resources[function_id]["Properties"]["FunctionName"]})
    return found


def test_every_route_is_the_registrys_and_behind_the_pools_jwt_authorizer(default_synth):
    routes = _template_routes(default_synth)
    assert sorted((r["route_key"], r["function_name"]) for r in routes) == sorted(
        (r.route_key, r.function) for r in ROUTES + CONSOLE_ROUTES)
    # The JSON routes behind the JWT authorizer, the console's pages behind the cookie
    # authorizer (tests/infra/test_console_authorizer.py), the sign-in behind none.
    (authorizer_id,) = {r["authorizer"] for r in routes if r["authorization"] == "JWT"}
    expected = {AUTH_JWT: ("JWT", authorizer_id), AUTH_COOKIE: ("CUSTOM", Ids.CONSOLE_AUTHORIZER),
                AUTH_NONE: ("NONE", None)}
    for route in ROUTES + CONSOLE_ROUTES:
        (found,) = [r for r in routes if r["route_key"] == route.route_key]
        assert (found["authorization"], found["authorizer"]) == expected[route.auth], route.route_key
    jwt = default_synth.resources[authorizer_id]["Properties"]["JwtConfiguration"]
    assert {"Ref": Ids.OPERATOR_POOL} in jwt["Issuer"]["Fn::Join"][1]
    (audience,) = jwt["Audience"]
    assert default_synth.resources[audience["Ref"]]["Type"] == "AWS::Cognito::UserPoolClient"
    assert default_synth.resources[audience["Ref"]]["Properties"]["GenerateSecret"] is False


def test_the_pool_requires_mfa_admits_no_self_sign_up_and_has_the_three_groups(default_synth):
    pool = default_synth.resources[Ids.OPERATOR_POOL]["Properties"]
    assert pool["MfaConfiguration"] == "ON" and pool["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    pool_groups = _of_type(default_synth, "AWS::Cognito::UserPoolGroup").values()
    groups = sorted(g["Properties"]["GroupName"] for g in pool_groups)
    assert groups == sorted(GROUPS)


def test_the_functions_resource_policies_are_exactly_the_contracts_rows(default_synth):
    ids = {logical: name for name, logical in operator_contract.FUNCTION_IDS.items()}
    got = []
    for permission in _of_type(default_synth, "AWS::Lambda::Permission").values():
        props = permission["Properties"]
        target = props["FunctionName"]
        logical = target.get("Fn::GetAtt", [None])[0] if isinstance(target, dict) else None
        if logical in ids:
            assert props["Action"] == "lambda:InvokeFunction"
            got.append((ids[logical], props["Principal"], operator_contract.source_of(props.get("SourceArn"))))
    assert sorted(got) == sorted((r.function, r.principal, r.source) for r in operator_contract.invokers())


def test_the_two_person_amount_reaches_the_decision_function(default_synth):
    env = default_synth.resources[Ids.DECISION_FUNCTION]["Properties"]["Environment"]["Variables"]
    assert env["APROVACAO_DUPLA_ACIMA_REAIS"] == "2000.00"


def test_the_operator_docs_carry_the_generated_invoker_rows():
    text = (ROOT / "docs" / "operators.md").read_text(encoding="utf-8")
    assert operator_contract.block(text) == operator_contract.render_markdown()


def _event(route_key: str, claims: dict[str, Any] | None, body: dict[str, Any] | None) -> dict[str, Any]:
    route = ApiRoute(route_key, "")
    params = {name: SAMPLE_PARAMS[name] for name in SAMPLE_PARAMS if "{" + name + "}" in route.path}
    path = route.path.format(**params)
    return api_event(route, params, method=route.method, path=path, query="",
                     headers={"content-type": "application/json"},
                     body=json.dumps(body) if body is not None else None, claims=claims)


@pytest.fixture
def offline_env(monkeypatch):
    for name, value in {"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x",
                        "AWS_SECRET_ACCESS_KEY": "x", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
                        "LEDGER_TABLE": "cadencia-ledger", "RESUME_FUNCTION": "",
                        "POWERTOOLS_LOG_LEVEL": "WARNING"}.items():
        monkeypatch.setenv(name, value)


def _claims(*groups: str) -> dict[str, Any]:
    return {"sub": "0d4c1a8e-8f1e-4a51-9c2e-7a0f3c9b1e22", "iss": "https://cognito-idp.us-east-1.amazonaws.com/x",
            "client_id": "c", "token_use": "access", "username": "pessoa", "cognito:groups": list(groups),
            "exp": 4102444800, "iat": 1700000000}


def test_events_built_from_the_templates_routes_are_refused_without_the_right_person(default_synth, offline_env):
    routes = [r for r in _template_routes(default_synth) if r["authorization"] == "JWT"]  # the console's: its tests
    assert routes
    for route in routes:
        module, _, name = route["handler"].rpartition(".")
        handler = getattr(importlib.import_module(module), name)
        group = _group(route)
        post = route["route_key"].startswith("POST ")
        body = _body(route["route_key"])
        context = LocalContext(route["function_name"])
        answer = handler(_event(route["route_key"], None, body), context)
        assert answer["statusCode"] == 401, (route["route_key"], answer)
        outsider = APPROVERS if group == SUPERVISORS else SUPERVISORS
        answer = handler(_event(route["route_key"], _claims(outsider), body), context)
        assert answer["statusCode"] == 403, (route["route_key"], answer)
        if post:
            answer = handler(_event(route["route_key"], _claims(group), {**body, "aprovador": "outra.pessoa"}),
                             context)
            assert (answer["statusCode"], json.loads(answer["body"])["erro"]["codigo"]) == (400, "ator_no_corpo")


def test_console_routes_from_the_template_reach_the_pages_only_with_the_authorizers_person(default_synth,
                                                                                          offline_env):
    """The cookie routes' integrations call the decision function's pages: without the
    cookie authorizer's context nobody is signed in; with it, a POST still needs its CSRF token."""
    routes = [r for r in _template_routes(default_synth) if r["authorization"] == "CUSTOM"]
    assert len(routes) == 6
    for route in routes:
        module, _, name = route["handler"].rpartition(".")
        handler = getattr(importlib.import_module(module), name)
        context = LocalContext(route["function_name"])
        api_route = ApiRoute(route["route_key"], route["function_name"], AUTH_COOKIE)
        params = {n: SAMPLE_PARAMS[n] for n in SAMPLE_PARAMS if "{" + n + "}" in api_route.path}
        path = api_route.path.format(**params)

        def event(claims: dict[str, Any] | None, api_route=api_route, params=params, path=path) -> dict[str, Any]:
            return api_event(api_route, params, method=api_route.method, path=path, query="",
                             headers={"content-type": "application/x-www-form-urlencoded",
                                      "cookie": "cadencia_sessao=a.b.c"},
                             body="" if api_route.method == "POST" else None, claims=claims)

        # A page without a person: 401. A POST is refused before anything is read (sign-out,
        # which needs no person, checks its CSRF token first: 403).
        expected = {401} if api_route.method == "GET" else {401, 403}
        assert handler(event(None), context)["statusCode"] in expected, route["route_key"]
        if api_route.method == "POST":
            assert handler(event(_claims(APPROVERS, SUPERVISORS)), context)["statusCode"] == 403, route["route_key"]

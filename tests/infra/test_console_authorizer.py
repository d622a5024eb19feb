"""The console's cookie authorizer on the synthesized template: a REQUEST Lambda
authorizer (payload 2.0, simple responses, the Cookie header as identity source, no
results cache) on the console's function, outside the VPC, configured with the pool's
issuer and the console's app client, and invokable only by API Gateway as that
authorizer. Standing in for API Gateway, the handler is fed an event built from the
TEMPLATE's authorizer configuration."""

from __future__ import annotations

from typing import Any

import pytest

from autorizar_console import handler
from autorizar_console.verification import KeySet
from cadencia_shared.identity import SESSION_COOKIE
from infra import operator_contract
from infra.contract import Ids
from orchestrator.api_routes import AUTH_COOKIE, CONSOLE_ROUTES
from scripts.local_stack import jwt_rs256

from ..test_console_authorizer import KEY, NOW, _claims, authorizer_event

pytestmark = pytest.mark.infra


def _authorizer(synth) -> dict[str, Any]:
    return synth.resources[Ids.CONSOLE_AUTHORIZER]["Properties"]


def test_the_authorizer_is_a_request_lambda_authorizer_on_the_cookie_without_a_cache(default_synth):
    props = _authorizer(default_synth)
    assert props["AuthorizerType"] == "REQUEST"
    assert props["AuthorizerPayloadFormatVersion"] == "2.0"
    assert props["EnableSimpleResponses"] is True
    assert props["IdentitySource"] == ["$request.header.Cookie"]
    assert props["AuthorizerResultTtlInSeconds"] == 0
    uri_parts = props["AuthorizerUri"]["Fn::Join"][1]
    assert {"Fn::GetAtt": [Ids.CONSOLE_AUTHORIZER_FUNCTION, "Arn"]} in uri_parts


def test_every_console_page_but_the_sign_in_is_behind_it(default_synth):
    routes = {r["Properties"]["RouteKey"]: r["Properties"]
              for r in default_synth.of_type("AWS::ApiGatewayV2::Route").values()}
    for route in CONSOLE_ROUTES:
        props = routes[route.route_key]
        if route.auth == AUTH_COOKIE:
            assert (props["AuthorizationType"], props["AuthorizerId"]) == ("CUSTOM", {"Ref": Ids.CONSOLE_AUTHORIZER})
        else:
            assert props["AuthorizationType"] == "NONE" and "AuthorizerId" not in props
    assert sum(r.auth == AUTH_COOKIE for r in CONSOLE_ROUTES) == 6


def test_the_function_is_outside_the_vpc_and_names_the_pool_and_its_client(default_synth):
    props = default_synth.resources[Ids.CONSOLE_AUTHORIZER_FUNCTION]["Properties"]
    assert "VpcConfig" not in props
    assert props["Handler"] == "autorizar_console.handler.lambda_handler"
    assert props["Role"] == {"Fn::GetAtt": [Ids.CONSOLE_AUTHORIZER_ROLE, "Arn"]}
    env = props["Environment"]["Variables"]
    assert {"Ref": Ids.OPERATOR_POOL} in env["COGNITO_ISSUER"]["Fn::Join"][1]
    client = env["CONSOLE_CLIENT_ID"]["Ref"]
    assert default_synth.resources[client]["Type"] == "AWS::Cognito::UserPoolClient"


def test_only_api_gateway_as_this_authorizer_may_invoke_it(default_synth):
    found = []
    for permission in default_synth.of_type("AWS::Lambda::Permission").values():
        props = permission["Properties"]
        if props["FunctionName"] == {"Fn::GetAtt": [Ids.CONSOLE_AUTHORIZER_FUNCTION, "Arn"]}:
            found.append((props["Action"], props["Principal"], operator_contract.source_of(props.get("SourceArn"))))
    assert found == [("lambda:InvokeFunction", "apigateway.amazonaws.com", f"authorizer:{Ids.CONSOLE_AUTHORIZER}")]


def _event_from_template(props: dict[str, Any], cookies: list[str]) -> dict[str, Any]:
    """What API Gateway sends this authorizer: payload 2.0 (the template's version), the
    identity source (the template's: the Cookie header) resolved, the cookies listed."""
    assert props["AuthorizerPayloadFormatVersion"] == "2.0"
    (source,) = props["IdentitySource"]
    assert source.lower() == "$request.header.cookie"
    event = authorizer_event(cookies)
    event["identitySource"] = ["; ".join(cookies)]
    return event


def test_the_handler_answers_the_templates_event_with_a_simple_response(default_synth, monkeypatch):
    props = _authorizer(default_synth)
    issuer = _claims()["iss"]
    fetched: list[str] = []
    monkeypatch.setenv("COGNITO_ISSUER", issuer)
    monkeypatch.setenv("CONSOLE_CLIENT_ID", _claims()["client_id"])
    built = handler.authorizer_from_environment()

    def fetch(url: str) -> list[dict[str, Any]]:
        fetched.append(url)
        return [jwt_rs256.jwk(KEY.public_key())]

    monkeypatch.setattr(handler, "_AUTHORIZER", handler.ConsoleAuthorizer(
        KeySet(built.key_set.issuer, fetch=fetch), built.client_ids, now=lambda: NOW))
    good = jwt_rs256.sign(_claims(), KEY)
    answer = handler.lambda_handler(_event_from_template(props, [f"{SESSION_COOKIE}={good}"]), None)
    assert answer["isAuthorized"] is True and answer["context"]["sub"] == _claims()["sub"]
    assert all(isinstance(v, str) for v in answer["context"].values())  # simple responses: text context
    expired = jwt_rs256.sign(_claims(exp=int(NOW)), KEY)
    assert handler.lambda_handler(_event_from_template(props, [f"{SESSION_COOKIE}={expired}"]), None) == {
        "isAuthorized": False}
    assert fetched == [f"{issuer}/.well-known/jwks.json"]

"""The console's cookie authorizer (functions/autorizar_console), the Lambda API Gateway
runs in front of every /console page but the sign-in: only a Cognito access token of
the console's app client, in exactly one ``cadencia_sessao`` cookie, signed RS256 by a
key of the pool's JWKS and unexpired by the injected clock, is authorized, and what it
hands on is exactly the claims the local adapter hands on. Hostile tokens come from
hypothesis; the clock is a number, never the wall clock."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autorizar_console import handler, verification
from autorizar_console.handler import ConsoleAuthorizer
from autorizar_console.verification import COOKIE_CONTEXT_CLAIMS, KeySet, TokenRefused
from cadencia_shared.identity import SESSION_COOKIE, person_from_event
from orchestrator.api_routes import CONSOLE_ROUTES, LOCAL_AUDIENCE
from scripts.local_stack import api_adapter, jwt_rs256, oidc_issuer

ISSUER = "https://cognito-idp.sa-east-1.amazonaws.com/sa-east-1_Teste123"
CLIENT = "4k2consolecliente0000000000"
NOW = 1_800_000_000.0
KEY = jwt_rs256.new_key()
OTHER_KEY = jwt_rs256.new_key()
SUB = "0d4c1a8e-8f1e-4a51-9c2e-7a0f3c9b1e22"


def _claims(**changes: Any) -> dict[str, Any]:
    claims = {"sub": SUB, "iss": ISSUER, "client_id": CLIENT, "token_use": "access", "username": "ana.operadora",
              "cognito:groups": ["aprovadores", "supervisores"], "scope": "aws.cognito.signin.user.admin",
              "auth_time": int(NOW) - 60, "iat": int(NOW) - 60, "exp": int(NOW) + 3600,
              "jti": "b6f1c1f4", "origin_jti": "9e0c"}
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _token(**changes: Any) -> str:
    return jwt_rs256.sign(_claims(**changes), KEY)


class Fetches:
    """The pool's JWKS endpoint: answers with the given key sets in turn, counting calls."""

    def __init__(self, *key_sets: list[dict[str, Any]]) -> None:
        self.key_sets = list(key_sets)
        self.urls: list[str] = []

    def __call__(self, url: str) -> list[dict[str, Any]]:
        self.urls.append(url)
        return self.key_sets[min(len(self.urls), len(self.key_sets)) - 1]


def _authorizer(fetches: Fetches | None = None, now: float = NOW) -> ConsoleAuthorizer:
    fetch = fetches or Fetches([jwt_rs256.jwk(KEY.public_key())])
    return ConsoleAuthorizer(KeySet(ISSUER, fetch=fetch), frozenset({CLIENT}), now=lambda: now)


def authorizer_event(cookies: list[str] | None, route_key: str = "GET /console/aprovacoes") -> dict[str, Any]:
    """A REQUEST authorizer event, payload format 2.0 (what API Gateway sends a Lambda
    authorizer whose identity source is ``$request.header.Cookie``)."""
    method, path = route_key.split(" ", 1)
    header = "; ".join(cookies or [])
    return {
        "version": "2.0", "type": "REQUEST",
        "routeArn": f"arn:aws:execute-api:sa-east-1:123456789012:abc123/$default/{method}{path}",
        "identitySource": [header] if header else [], "routeKey": route_key, "rawPath": path,
        "rawQueryString": "", **({"cookies": cookies} if cookies else {}),
        "headers": {"host": "abc123.execute-api.sa-east-1.amazonaws.com", "user-agent": "Mozilla/5.0"},
        "requestContext": {"accountId": "123456789012", "apiId": "abc123", "domainName": "abc123.example",
                           "domainPrefix": "abc123", "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                                                              "sourceIp": "203.0.113.9", "userAgent": "Mozilla/5.0"},
                           "requestId": "req-1", "routeKey": route_key, "stage": "$default",
                           "time": "06/Dec/2026:03:00:00 +0000", "timeEpoch": 1796526000000},
        "pathParameters": {}, "stageVariables": {},
    }


def _cookie(token: str) -> list[str]:
    return [f"{SESSION_COOKIE}={token}"]


def _segment(data: dict[str, Any]) -> str:
    return jwt_rs256.b64url(json.dumps(data).encode())


def _hs256_with_the_public_key() -> str:
    """The classic confusion: an HMAC "signature" keyed with the pool's public key."""
    secret = KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    head = _segment({"alg": "HS256", "typ": "JWT", "kid": jwt_rs256.jwk(KEY.public_key())["kid"]})
    signing_input = f"{head}.{_segment(_claims())}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{jwt_rs256.b64url(mac)}"


REFUSED: dict[str, list[str] | None] = {
    "no cookie": None,
    "another cookie only": ["tema=escuro"],
    "two session cookies": [*_cookie(_token()), *_cookie(_token())],
    "two session cookies in one element": [f"{SESSION_COOKIE}={_token()}; {SESSION_COOKIE}={_token()}"],
    "empty session cookie": [f"{SESSION_COOKIE}="],
    "garbage": _cookie("isto.nao.e-um-token"),
    "not three parts": _cookie("abc.def"),
    "not base64url": _cookie("a+b.c/d.e=f"),
    "a signature of an impossible base64 length": _cookie(_token().rpartition(".")[0] + ".abcde"),
    "claims nested thousands deep": _cookie(f"{_segment({'alg': 'RS256'})}.{jwt_rs256.b64url(b'[' * 5000)}.AAAA"),
    "cut short by a semicolon": [f"{SESSION_COOKIE}={_token()[:-150]};{_token()[-150:]}"],
    "alg none": _cookie(f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(_claims())}."),
    "alg none with the kid": _cookie(
        f"{_segment({'alg': 'none', 'kid': jwt_rs256.jwk(KEY.public_key())['kid']})}.{_segment(_claims())}."),
    "HS256 keyed with the public key": _cookie(_hs256_with_the_public_key()),
    "RS512 header": _cookie(jwt_rs256.sign(_claims(), KEY, header={"alg": "RS512",
                                                                  "kid": jwt_rs256.jwk(KEY.public_key())["kid"]})),
    "unknown kid": _cookie(jwt_rs256.sign(_claims(), KEY, kid="outra-chave")),
    "another key under the pool's kid": _cookie(jwt_rs256.sign(_claims(), OTHER_KEY,
                                                               kid=jwt_rs256.jwk(KEY.public_key())["kid"])),
    "wrong issuer": _cookie(_token(iss="https://cognito-idp.sa-east-1.amazonaws.com/sa-east-1_Outro")),
    "issuer with a trailing slash": _cookie(_token(iss=ISSUER + "/")),
    "wrong client_id": _cookie(_token(client_id="outro-app")),
    "no client_id": _cookie(_token(client_id=None)),
    "id token of the same client": _cookie(_token(token_use="id", client_id=None, aud=CLIENT)),
    "id token that also names the client": _cookie(_token(token_use="id", aud=CLIENT)),
    "access token with an aud": _cookie(_token(aud=CLIENT)),
    "no token_use": _cookie(_token(token_use=None)),
    "expired one second ago": _cookie(_token(exp=int(NOW) - 1)),
    "expiring now": _cookie(_token(exp=int(NOW))),
    "exp as text": _cookie(_token(exp=str(int(NOW) + 60))),
    "no exp": _cookie(_token(exp=None)),
    "issued in the future": _cookie(_token(iat=int(NOW) + 600)),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_every_hostile_or_wrong_cookie_is_unauthorized(case):
    assert _authorizer().decide(authorizer_event(REFUSED[case])) == {"isAuthorized": False}


def test_a_valid_access_token_is_authorized_with_exactly_the_adapters_context():
    answer = _authorizer().decide(authorizer_event(["tema=escuro", *_cookie(_token(name="Ana Operadora"))]))
    context = {"sub": SUB, "name": "Ana Operadora", "username": "ana.operadora",
               "cognito:groups": "[aprovadores supervisores]"}
    assert answer == {"isAuthorized": True, "context": context}
    assert set(answer["context"]) <= set(COOKIE_CONTEXT_CLAIMS)
    # API Gateway hands the context on as requestContext.authorizer.lambda: the person the pages read.
    person = person_from_event({"requestContext": {"authorizer": {"lambda": answer["context"]}}})
    assert (person.subject, person.name, person.groups) == (SUB, "Ana Operadora",
                                                            frozenset({"aprovadores", "supervisores"}))


def test_the_clock_is_the_injected_one():
    token = _cookie(_token(exp=int(NOW) + 10))
    assert _authorizer(now=NOW + 9.5).decide(authorizer_event(token))["isAuthorized"] is True
    assert _authorizer(now=NOW + 10).decide(authorizer_event(token)) == {"isAuthorized": False}


def test_the_key_set_is_fetched_once_and_again_once_on_an_unknown_kid():
    old, new = jwt_rs256.jwk(OTHER_KEY.public_key()), jwt_rs256.jwk(KEY.public_key())
    fetches = Fetches([old], [old, new])
    authorizer = _authorizer(fetches)
    assert authorizer.decide(authorizer_event(_cookie(_token())))["isAuthorized"] is True  # rotated: refetched
    assert authorizer.decide(authorizer_event(_cookie(_token())))["isAuthorized"] is True  # cached
    assert fetches.urls == [f"{ISSUER}/.well-known/jwks.json"] * 2
    stranger = jwt_rs256.sign(_claims(), jwt_rs256.new_key(), kid="desconhecida")
    assert authorizer.decide(authorizer_event(_cookie(stranger))) == {"isAuthorized": False}
    # Refetched within REFRESH_EVERY_S already: a made-up kid costs no fetch, not a loop.
    assert len(fetches.urls) == 2


def test_an_unknown_kid_refetches_the_key_set_at_most_once_per_interval():
    clock = [NOW]
    fetches = Fetches([jwt_rs256.jwk(KEY.public_key())])
    authorizer = ConsoleAuthorizer(KeySet(ISSUER, fetch=fetches), frozenset({CLIENT}), now=lambda: clock[0])
    stranger = jwt_rs256.sign(_claims(), jwt_rs256.new_key(), kid="desconhecida")
    for _ in range(20):
        assert authorizer.decide(authorizer_event(_cookie(stranger))) == {"isAuthorized": False}
    assert len(fetches.urls) == 2  # the first read, and one refetch for the unknown kid
    clock[0] += verification.REFRESH_EVERY_S
    assert authorizer.decide(authorizer_event(_cookie(stranger))) == {"isAuthorized": False}
    assert len(fetches.urls) == 3  # a rotation is still picked up, once per interval


def test_an_unreachable_key_set_is_unauthorized_not_an_error():
    def down(url: str) -> list[dict[str, Any]]:
        return verification.fetch_jwks("http://127.0.0.1:9/.well-known/jwks.json")

    authorizer = ConsoleAuthorizer(KeySet(ISSUER, fetch=down), frozenset({CLIENT}), now=lambda: NOW)
    assert authorizer.decide(authorizer_event(_cookie(_token()))) == {"isAuthorized": False}


def test_the_log_never_carries_the_token_nor_a_claim(caplog):
    token = _token(name="Ana Operadora")
    with caplog.at_level(logging.INFO, logger="autorizar_console"):
        _authorizer().decide(authorizer_event(_cookie(token)))
        _authorizer().decide(authorizer_event(_cookie(_token(exp=int(NOW) - 1))))
    text = caplog.text
    assert "authorized" in text
    for secret in (token, token.split(".")[1], SUB, "Ana Operadora", "ana.operadora", "aprovadores"):
        assert secret not in text


def test_the_environment_names_the_pool_and_the_client(monkeypatch):
    monkeypatch.setenv("COGNITO_ISSUER", ISSUER + "/")
    monkeypatch.setenv("CONSOLE_CLIENT_ID", CLIENT)
    built = handler.authorizer_from_environment()
    assert (built.key_set.url, built.client_ids) == (f"{ISSUER}/.well-known/jwks.json", frozenset({CLIENT}))
    monkeypatch.setenv("COGNITO_ISSUER", "http://cognito-idp.example/pool")
    with pytest.raises(RuntimeError):
        handler.authorizer_from_environment()


def _decoded(token: str) -> tuple[bytes, ...]:
    try:
        return tuple(verification.unb64url(part) for part in token.split("."))
    except (TokenRefused, ValueError):
        return ()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position=st.integers(min_value=0), replacement=st.characters(codec="ascii"))
def test_a_token_changed_anywhere_is_unauthorized_unless_it_decodes_to_the_same_bytes(position, replacement):
    token = _token()
    position %= len(token)
    mutated = token[:position] + replacement + token[position + 1:]
    answer = _authorizer().decide(authorizer_event(_cookie(mutated)))
    if answer["isAuthorized"]:  # base64url's last character carries spare bits: the same token
        assert _decoded(mutated) == _decoded(token)


@settings(max_examples=150, deadline=None)
@given(changes=st.dictionaries(
    st.sampled_from(["iss", "client_id", "token_use", "exp", "aud"]),
    st.one_of(st.none(), st.text(max_size=40), st.integers(), st.floats(allow_nan=False), st.booleans(),
              st.lists(st.text(max_size=10), max_size=3)),
    min_size=1))
def test_claims_changed_away_from_the_rules_are_unauthorized(changes):
    valid = _claims()
    effective = {k: v for k, v in {**valid, **changes}.items() if v is not None}
    still_valid = (effective.get("iss") == ISSUER and effective.get("client_id") == CLIENT
                   and effective.get("token_use") == "access" and "aud" not in effective
                   and isinstance(effective.get("exp"), int | float) and not isinstance(effective.get("exp"), bool)
                   and effective["exp"] > NOW)
    token = jwt_rs256.sign(effective, KEY)
    assert _authorizer().decide(authorizer_event(_cookie(token)))["isAuthorized"] is still_valid


def test_locally_the_adapter_runs_the_same_code_on_the_same_cookie():
    """The local API adapter's cookie authorizer and the Lambda give the same answer and
    the same context for tokens of the local OpenID issuer (served over loopback HTTP)."""
    issuer = oidc_issuer.Issuer(key=KEY, users=oidc_issuer.load_users(), audience=LOCAL_AUDIENCE, now=lambda: NOW)
    server = oidc_issuer.serve(issuer)
    try:
        user = next(iter(issuer.users.values()))
        token = issuer.token_for(user.login, user.password, LOCAL_AUDIENCE)
        assert token is not None
        adapter = api_adapter.Authorizer(issuer=issuer.url, audiences=frozenset({LOCAL_AUDIENCE}), now=lambda: NOW)
        lambda_side = ConsoleAuthorizer(KeySet(issuer.url), frozenset({LOCAL_AUDIENCE}), now=lambda: NOW)
        header = f"tema=escuro; {SESSION_COOKIE}={token}"
        route = next(r for r in CONSOLE_ROUTES if r.route_key == "GET /console/aprovacoes")
        event = api_adapter.api_event(route, {}, method="GET", path="/console/aprovacoes", query="",
                                      headers={"Cookie": header}, body=None,
                                      claims=adapter.cookie_claims(header))
        answer = lambda_side.decide(authorizer_event(["tema=escuro", f"{SESSION_COOKIE}={token}"]))
        assert answer["isAuthorized"] is True
        assert event["requestContext"]["authorizer"]["lambda"] == answer["context"]
        for hostile in (f"{SESSION_COOKIE}={token}; {SESSION_COOKIE}={token}", "", f"{SESSION_COOKIE}=x.y.z"):
            with pytest.raises(TokenRefused):
                adapter.cookie_claims(hostile)
            assert lambda_side.decide(authorizer_event([c for c in hostile.split("; ") if c])) == {
                "isAuthorized": False}
    finally:
        server.shutdown()
        server.server_close()


@settings(max_examples=300, deadline=None)
@given(cookies=st.one_of(st.none(), st.text(max_size=50), st.lists(st.one_of(
    st.text(max_size=300), st.text(max_size=300).map(lambda v: f"{SESSION_COOKIE}={v}"), st.integers(), st.none()),
    max_size=4)))
def test_any_cookies_at_all_are_unauthorized_and_never_an_error(cookies):
    event = authorizer_event(None)
    if cookies is not None:
        event["cookies"] = cookies
    assert _authorizer().decide(event) == {"isAuthorized": False}
    assert _authorizer().decide(cookies) == {"isAuthorized": False}  # not even an event

"""The console's strict forms, CSRF token and session cookie, without a stack."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decidir_aprovacao.console_session import (
    FormRefused,
    check_csrf,
    csrf_token,
    form_body,
    session_cookie,
    session_token,
)

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"
FIELDS = frozenset({"csrf", "decisao", "justificativa"})


def _event(body: str, *, cookie: str | None = TOKEN, content_type: str = "application/x-www-form-urlencoded"):
    return {"headers": {"content-type": content_type}, "body": body,
            **({"cookies": [f"cadencia_sessao={cookie}"]} if cookie else {})}


def test_a_well_formed_form_is_read():
    body = urllib.parse.urlencode({"csrf": csrf_token(TOKEN), "decisao": "negar", "justificativa": "fora <b>"})
    form = form_body(_event(body), FIELDS)
    assert form["justificativa"] == "fora <b>"
    check_csrf(_event(body), form)


@pytest.mark.parametrize(("body", "code"), [
    ("decisao=aprovar&decisao=negar", "campo_repetido"),
    ("decisao=aprovar&aprovador=bruno", "ator_no_corpo"),
    ("decisao=aprovar&valor=1", "campo_desconhecido"),
    ("decisao", "corpo_invalido"),
    ("x" * 40_000, "corpo_invalido"),
])
def test_hostile_forms_are_refused(body, code):
    with pytest.raises(FormRefused) as refused:
        form_body(_event(body), FIELDS)
    assert (refused.value.status, refused.value.code) == (400, code)


def test_json_is_not_a_form():
    with pytest.raises(FormRefused):
        form_body(_event('{"decisao":"aprovar"}', content_type="application/json"), FIELDS)


@given(st.text(max_size=80))
def test_only_the_sessions_own_csrf_token_passes(sent):
    if sent == csrf_token(TOKEN):
        return
    with pytest.raises(FormRefused) as refused:
        check_csrf(_event(""), {"csrf": sent})
    assert refused.value.code == "csrf_invalido"


def test_no_cookie_or_two_cookies_is_no_session():
    assert session_token(_event("", cookie=None)) is None
    event = {"headers": {}, "cookies": [f"cadencia_sessao={TOKEN}", f"cadencia_sessao={TOKEN}x"]}
    assert session_token(event) is None
    with pytest.raises(FormRefused):
        check_csrf(event, {"csrf": csrf_token(TOKEN)})
    assert session_token({"headers": {"cookie": f"a=b; cadencia_sessao={TOKEN}"}}) == TOKEN


def test_the_session_cookie_is_httponly_secure_strict():
    text = str(session_cookie(TOKEN))
    assert text.startswith(f"cadencia_sessao={TOKEN}; Path=/console")
    assert all(flag in text for flag in ("HttpOnly", "Secure", "SameSite=Strict"))

"""The loopback gateway answers every malformed refund body with a 400 and debits nothing
(before the split of its refund route, a JSON array or a string body raised inside the
handler and the connection closed without an answer). In-process server: no local stack."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scripts.local_stack.gateway_server import GatewayState, make_server

TOKEN = "token-de-teste"


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, GatewayState]]:
    state = GatewayState(token=TOKEN)
    server = make_server("127.0.0.1", 0, state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def _post(url: str, raw: bytes, key: str = "k-corpo") -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/v1/reembolsos", data=raw, method="POST", headers={
        "Authorization": f"Bearer {TOKEN}", "Idempotency-Key": key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.parametrize("raw", [b"[]", b'"texto"', b"7", b"null", b"{", b'{"valor": 10}', b'{"pedidoId": "1"}',
                                 b'{"valor": "dez", "pedidoId": "1"}', b'{"valor": [1], "pedidoId": "1"}'])
def test_a_malformed_body_is_a_400_and_no_debit(gateway, raw):
    url, state = gateway
    assert _post(url, raw) == (400, {"erro": "corpo_invalido"})
    assert state.debits == []


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8))
def test_any_json_body_without_a_valid_refund_gets_an_answer_and_debits_nothing(gateway, body):
    assume(not (isinstance(body, dict) and {"valor", "pedidoId"} <= body.keys()))
    url, state = gateway
    status, answer = _post(url, json.dumps(body).encode())
    assert status == 400 and answer["erro"] in {"corpo_invalido", "valor_invalido"}
    assert state.debits == []


def test_a_valid_body_still_debits_once(gateway):
    url, state = gateway
    raw = json.dumps({"valor": 12.5, "pedidoId": "4821"}).encode()
    assert _post(url, raw, key="k-valido")[0] == 201
    assert _post(url, raw, key="k-valido")[0] == 200  # replayed, not debited again
    assert len(state.debits) == 1
    state.reset()

"""SEAL's session store: a session holds the public key, conversation, customer, tools,
limits and expiry (on the ledger's clock); the private key stays in memory only. A
closed or expired session verifies nothing."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore, session_pk

NOW_S = 1_800_000_000.0


def _ledger(mocked_aws, clock=lambda: NOW_S) -> Ledger:
    return Ledger(mocked_aws["ledger"].table_name, mocked_aws["dynamodb"], clock=clock)


def test_the_stored_public_key_is_the_pairs_and_the_private_key_is_never_stored(mocked_aws):
    ledger = _ledger(mocked_aws)
    session = SessionStore(ledger.table).open_session(
        conversation_id="conv-chave", customer_id=1001, tools={"consultar_status_pedido"},
        limits=SessionLimits(), expires_at_ms=int(NOW_S * 1000) + 45_000)
    item = ledger.table.get(session_pk(session.session_id))
    assert item["tipo"] == "sessao" and item["conversaId"] == "conv-chave" and item["clienteId"] == 1001
    assert item["validaAteMs"] == int(NOW_S * 1000) + 45_000 and item["estado"] == "aberta"
    Ed25519PublicKey.from_public_bytes(base64.b64decode(item["chavePublica"])).verify(session.sign(b"x"), b"x")
    assert "privada" not in str(item).lower() and "private" not in repr(session).lower()


def test_an_open_session_verifies_only_before_its_expiry(mocked_aws):
    now = [NOW_S]
    store = SessionStore(_ledger(mocked_aws, clock=lambda: now[0]).table)
    session = store.open_session(conversation_id="conv-exp", customer_id=7, tools={"emitir_reembolso"},
                                 limits=SessionLimits(), expires_at_ms=int(NOW_S * 1000) + 1000)
    assert store.read_open_session(session.session_id) == session.record
    now[0] += 1.0
    assert store.read_open_session(session.session_id) is None  # expired: verifies nothing
    assert store.read_session(session.session_id) == session.record  # still there, for the audit


@pytest.mark.parametrize("session_id", ["", "a#b", "nao-existe"])
def test_a_malformed_or_unknown_session_id_reads_as_no_session(mocked_aws, session_id):
    assert SessionStore(_ledger(mocked_aws).table).read_open_session(session_id) is None


def test_closing_is_idempotent_and_a_closed_session_verifies_nothing(mocked_aws):
    store = SessionStore(_ledger(mocked_aws).table)
    session = store.open_session(conversation_id="conv-close", customer_id=7, tools={"emitir_reembolso"},
                                 limits=SessionLimits(), expires_at_ms=int(NOW_S * 1000) + 60_000)
    store.close_session(session.session_id)
    store.close_session(session.session_id)
    store.close_session("nunca-aberta")  # nothing to close: no item is created
    assert store.read_open_session(session.session_id) is None
    assert store.table.get(session_pk("nunca-aberta")) is None

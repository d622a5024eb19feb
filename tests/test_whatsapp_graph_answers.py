"""How the Graph API's answer to a send is read (canal_whatsapp/graph.py), answer by answer:
a 2xx is delivered only with a message id (else the outcome is unknown, never re-sent),
131047 is the closed service window, other errors are NotSent, retryable on the documented
temporary codes, 429 and 5xx. Pure parsing: no server needed."""

from __future__ import annotations

import json

import pytest

from canal_whatsapp.graph import NotSent, OutsideServiceWindow, SendOutcomeUnknown, _message_id


def _raw(body: object) -> bytes:
    return json.dumps(body).encode()


@pytest.mark.parametrize("status, data, wamid", [
    (200, _raw({"messages": [{"id": "wamid.A"}]}), "wamid.A"),
    (201, _raw({"messages": [{"id": "wamid.B"}, {"id": "wamid.C"}]}), "wamid.B"),
])
def test_a_2xx_with_a_message_id_is_delivered(status, data, wamid):
    assert _message_id(status, data) == wamid


@pytest.mark.parametrize("data", [b"", b"not json", b"\xff\xfe", _raw([]), _raw({"messages": []}),
                                  _raw({"messages": [{}]}), _raw({"messages": ["wamid.A"]}),
                                  _raw({"messages": {"id": "wamid.A"}}), _raw({"messages": [{"id": ""}]})])
def test_a_2xx_without_a_message_id_is_an_unknown_outcome(data):
    with pytest.raises(SendOutcomeUnknown):
        _message_id(200, data)


def test_131047_is_the_closed_service_window():
    with pytest.raises(OutsideServiceWindow):
        _message_id(400, _raw({"error": {"code": 131047}}))


@pytest.mark.parametrize("status, data, code, retryable", [
    (400, _raw({"error": {"code": 131056}}), 131056, True),
    (400, _raw({"error": {"code": 100}}), 100, False),
    (400, _raw({"error": {"code": True}}), None, False),  # a bool is not a code
    (400, _raw({"error": {"code": "131047"}}), None, False),  # nor is a string
    (400, _raw({"error": "131047"}), None, False),
    (400, _raw(["error"]), None, False),
    (429, b"", None, True),
    (503, b"<html>", None, True),
])
def test_other_errors_are_not_sent(status, data, code, retryable):
    with pytest.raises(NotSent) as err:
        _message_id(status, data)
    assert (err.value.status, err.value.code, err.value.retryable) == (status, code, retryable)

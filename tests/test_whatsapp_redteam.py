"""The channel red-teamed the way the issue's checker will (issue 12): webhook attacks
over real HTTP against the ingress process, and storms against the whole local
channel. Each test here was written against a defect or a claim; the defects'
tests failed before their fix."""

from __future__ import annotations

import json

import pytest

from canal_whatsapp.signature import sign
from scripts.local_stack.whatsapp_channel import LocalChannel
from scripts.local_stack.whatsapp_fake import notification, text_message
from tests.support.whatsapp import ANA, day_ts, drain

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def ingress(local_stack):
    """The webhook alone (nothing consumes its queue: what was enqueued is read from it)."""
    from scripts.local_stack import postgres

    postgres.apply_sql(local_stack.postgres, ("demo.sql",))
    with LocalChannel(local_stack, model_env={}, consumers=0) as ch:
        yield ch


@pytest.fixture
def queue(ingress):
    drain(ingress.sqs, ingress.queue_url)
    return lambda: drain(ingress.sqs, ingress.queue_url)


@pytest.mark.parametrize("body", [
    b"[" * 50_000 + b"]" * 50_000,
    b'{"object":"whatsapp_business_account","entry":' + b"[" * 40_000 + b"]" * 40_000 + b"}",
    b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
], ids=["arrays", "inside the payload", "objects"])
def test_a_signed_but_deeply_nested_body_is_a_400_not_a_crash(ingress, queue, body):
    """Found: json.loads raised RecursionError (not a ValueError), the Lambda crashed and
    the Function URL answered 502 — which Meta retries for days. Signed, so only
    whoever holds the App Secret can send it; still a malformed payload: 400, nothing enqueued."""
    assert len(body) < 128 * 1024
    assert ingress.webhook.post_raw(body, sign(body, ingress.app_secret)) == 400
    assert queue() == []
    ok = json.dumps(notification([text_message(ANA, "depois", timestamp=day_ts(60))])).encode()
    assert ingress.webhook.post_raw(ok, sign(ok, ingress.app_secret)) == 200  # the process is fine
    assert len(queue()) == 1

"""One rule for the inbound queue's timing, deployed and local: a message never runs
out of receives while a consumer that died mid-turn still holds its conversation."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal_whatsapp.queue_timing import LEASE_MARGIN_S, held_lease_s, queue_timing


@given(turn=st.integers(1, 900), lease=st.integers(5, 3600), redelivery=st.none() | st.integers(1, 900))
def test_the_receives_outlast_a_dead_consumers_lease(turn, lease, redelivery):
    t = queue_timing(turn_timeout_s=turn, lease_s=lease, redelivery_s=redelivery)
    held = held_lease_s(lease, turn)
    assert held == max(lease, turn + LEASE_MARGIN_S)
    # The dead consumer's own message reappears after its lease ran out (and one more turn).
    assert t.visibility_s >= held + turn
    # Any message of that conversation refused as busy is retried past the lease.
    assert (t.max_receives - 1) * t.redelivery_s >= held + turn
    assert t.max_receives == 5 and t.visibility_s <= 12 * 3600


def test_the_local_channel_uses_the_rule():
    from scripts.local_stack import whatsapp_channel as local

    t = local.local_timing()
    assert t == queue_timing(turn_timeout_s=local.TURN_TIMEOUT_S, lease_s=local.LOCAL_LEASE_S,
                             redelivery_s=local.RETRY_AFTER_S)
    assert local.consumer_timing_environment(t)["CONVERSA_LEASE_S"] == str(local.LOCAL_LEASE_S)


def test_the_old_local_timing_broke_the_rule():
    """Visibility 30 s, retries 1 s apart, 5 receives, lease 120 s: the measured DLQ losses."""
    held = held_lease_s(120, 25)
    assert held + 25 > 30 and held + 25 > 4 * 1
    t = queue_timing(turn_timeout_s=25, lease_s=120, redelivery_s=1)
    assert t.redelivery_s > 1 and t.visibility_s > 30


@pytest.mark.parametrize("turn,lease", [(90, 120)])
def test_the_deployed_values(turn, lease):
    t = queue_timing(turn_timeout_s=turn, lease_s=lease)
    assert (t.visibility_s, t.max_receives, t.redelivery_s) == (540, 5, 540)


# -- on the local stack: a conversation held by a consumer that died mid-turn ----------------
LEASE_LEFT_S = 12  # what is left of the dead consumer's lease once the queue first meets it
@pytest.mark.stack
def test_a_conversation_held_by_a_dead_consumer_is_answered_not_dead_lettered(local_stack, erp):
    from pathlib import Path

    from cadencia_shared.ledger import Ledger
    from scripts.local_stack.aws import session_client
    from scripts.local_stack.whatsapp_fake import notification, text_message
    from scripts.local_stack.whatsapp_model import ECHO_PREFIX
    from tests.support.whatsapp import ANA, day_ts, scripted_channel

    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    with scripted_channel(local_stack, consumers=1) as ch:
        # What a consumer killed mid-turn leaves: the conversation's lease, held until it expires.
        # Held (no expiry in sight) until the live consumer has met it at least once, however
        # long the channel took to start; from then on it expires LEASE_LEFT_S later, as a
        # dead consumer's lease does, and the queue's timing must outlast that.
        conversation = "wa-1001-20260720"
        ledger.acquire_conversation(conversation_id=conversation, customer_id=1001, lease_s=3600)
        message = text_message(ANA, "o outro travou", timestamp=day_ts(140))
        assert ch.webhook.post(notification([message])) == 200

        def logs() -> str:
            return "".join(p.read_text(errors="replace") for p in Path(ch.dir).glob("consumer-*.log"))

        deadline = time.monotonic() + 180
        while "registro falhou" not in logs():
            assert time.monotonic() < deadline, "the consumer never met the held conversation"
            time.sleep(0.1)
        ledger.client.update_item(
            TableName=ledger.table_name, Key={"pk": {"S": f"conversa#{conversation}"}},
            UpdateExpression="SET leaseAteMs = :ate",
            ExpressionAttributeValues={":ate": {"N": str(ledger.now_ms() + LEASE_LEFT_S * 1000)}})
        sent = ch.wait_for_replies(ANA, 1, timeout_s=90)
        assert [m.body for m in sent] == [f"{ECHO_PREFIX}o outro travou"]
        assert ch.wait_until_drained(30) and ch.queue_depth(ch.dlq_url) == 0
        assert ANA not in logs()

"""The WhatsApp consumer's delivery paths in the synthesized template: hand-offs on
the stack's bus, and the inbound queue's timing derived from the conversation lease."""

from __future__ import annotations

import pytest

from cadencia_shared.catalog import HANDOFF_BUS_NAME
from infra.contract import Ids
from infra.policy_check import extract_roles

pytestmark = pytest.mark.infra


def _props(synth, logical_id):
    return synth.resources[logical_id]["Properties"]


def test_the_whatsapp_consumer_publishes_hand_offs_on_the_stack_bus_only(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        env = _props(synth, Ids.WHATSAPP_CONSUMER_FUNCTION)["Environment"]["Variables"]
        assert env["EVENT_BUS_NAME"] == HANDOFF_BUS_NAME
        pairs = extract_roles(synth.template)[Ids.WHATSAPP_CONSUMER_ROLE].pairs
        assert {r for a, r in pairs if a == "events:PutEvents"} == {"${" + Ids.HANDOFF_BUS + ".Arn}"}


def test_the_inbound_queue_timing_is_the_one_derived_from_the_lease(default_synth, variant_synth):
    from canal_whatsapp.queue_timing import queue_timing
    from orchestrator.settings import OrchestratorSettings

    lease_s = OrchestratorSettings.model_fields["conversation_lease_s"].default
    for synth in (default_synth, variant_synth):
        env = _props(synth, Ids.WHATSAPP_CONSUMER_FUNCTION)["Environment"]["Variables"]
        lease_s = int(env.get("CONVERSA_LEASE_S", lease_s))
        timeout_s = _props(synth, Ids.WHATSAPP_CONSUMER_FUNCTION)["Timeout"]
        timing = queue_timing(turn_timeout_s=timeout_s, lease_s=lease_s)
        queue = _props(synth, Ids.WHATSAPP_QUEUE)
        assert queue["VisibilityTimeout"] == timing.visibility_s
        assert queue["RedrivePolicy"]["maxReceiveCount"] == timing.max_receives
        # A failed record reappears after the visibility timeout (the event source mapping).
        assert timing.redelivery_s == timing.visibility_s


def test_replies_the_cloud_api_refused_wait_in_the_resend_queue_and_their_age_is_alarmed(default_synth):
    from cadencia_shared.observability import NAMESPACE
    from canal_whatsapp.resends import UNSENT_AGE_METRIC

    queue = _props(default_synth, Ids.WHATSAPP_RESEND_QUEUE)
    assert "FifoQueue" not in queue  # per-message DelaySeconds
    assert queue["VisibilityTimeout"] == _props(default_synth, Ids.WHATSAPP_QUEUE)["VisibilityTimeout"]
    consumer_env = _props(default_synth, Ids.WHATSAPP_CONSUMER_FUNCTION)["Environment"]["Variables"]
    orchestrator_env = _props(default_synth, Ids.ORCHESTRATOR_FUNCTION)["Environment"]["Variables"]
    assert consumer_env["WHATSAPP_RESEND_QUEUE_URL"] == orchestrator_env["WHATSAPP_RESEND_QUEUE_URL"] == {
        "Ref": Ids.WHATSAPP_RESEND_QUEUE}
    roles = extract_roles(default_synth.template)
    resend_arn = "${" + Ids.WHATSAPP_RESEND_QUEUE + ".Arn}"
    assert {a for a, r in roles[Ids.ORCHESTRATOR_ROLE].pairs if r == resend_arn} == {"sqs:SendMessage"}
    assert {a for a, r in roles[Ids.WHATSAPP_CONSUMER_ROLE].pairs if r == resend_arn} == {
        "sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    alarms = [a["Properties"] for a in default_synth.of_type("AWS::CloudWatch::Alarm").values()]
    age = [a for a in alarms if a.get("MetricName") == UNSENT_AGE_METRIC and a.get("Namespace") == NAMESPACE]
    assert len(age) == 1 and age[0]["Statistic"] == "Maximum" and age[0]["Threshold"] == 900
    oldest = [a for a in alarms if a.get("MetricName") == "ApproximateAgeOfOldestMessage"]
    assert len(oldest) == 1 and oldest[0]["Dimensions"][0]["Value"]["Fn::GetAtt"][0] == Ids.WHATSAPP_RESEND_QUEUE

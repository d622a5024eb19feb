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

"""The inbound queue's seal in the synthesized template: the queue key is read by the
ingress and the consumer only, and the queue's retention is the one the consumer's
age bound is derived from (docs/decisions/queue-assertion.md)."""

from __future__ import annotations

import pytest

from canal_whatsapp.queue_timing import INBOUND_RETENTION_S
from canal_whatsapp.settings import QUEUE_KEY_NAME
from infra.contract import Ids
from infra.policy_check import extract_roles

pytestmark = pytest.mark.infra


def test_the_queue_key_is_read_by_the_ingress_and_the_consumer_only(default_synth, variant_synth):
    key = "${" + Ids.WHATSAPP_QUEUE_KEY + "}"
    for synth in (default_synth, variant_synth):
        readers = {logical_id for logical_id, role in extract_roles(synth.template).items()
                   if ("secretsmanager:GetSecretValue", key) in role.pairs}
        assert readers == {Ids.WHATSAPP_INGRESS_ROLE, Ids.WHATSAPP_CONSUMER_ROLE}
        secret = synth.resources[Ids.WHATSAPP_QUEUE_KEY]["Properties"]
        assert secret["Name"] == QUEUE_KEY_NAME and "GenerateSecretString" in secret
        for function in (Ids.WHATSAPP_INGRESS_FUNCTION, Ids.WHATSAPP_CONSUMER_FUNCTION):
            env = synth.resources[function]["Properties"]["Environment"]["Variables"]
            assert env["WHATSAPP_QUEUE_KEY_NAME"] == QUEUE_KEY_NAME


def test_the_inbound_queue_keeps_a_message_as_long_as_the_age_bound_assumes(default_synth):
    assert synth_retention(default_synth) == INBOUND_RETENTION_S


def synth_retention(synth) -> int:
    return int(synth.resources[Ids.WHATSAPP_QUEUE]["Properties"]["MessageRetentionPeriod"])

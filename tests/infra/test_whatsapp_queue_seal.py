"""The inbound queue's seal in the synthesized template: only the ingress's role may
put a message on the queue (its resource policy), the queue key is read by the
ingress and the consumer only, and the queue's retention is the one the consumer's
age bound is derived from (docs/decisions/queue-assertion.md)."""

from __future__ import annotations

import pytest

from canal_whatsapp.queue_timing import INBOUND_RETENTION_S
from canal_whatsapp.settings import QUEUE_KEY_NAME
from infra.contract import Ids
from infra.policy_check import extract_roles

pytestmark = pytest.mark.infra


def _queue_policy_statements(synth) -> list[dict]:
    out = []
    for policy in synth.of_type("AWS::SQS::QueuePolicy").values():
        props = policy["Properties"]
        if {"Ref": Ids.WHATSAPP_QUEUE} in props["Queues"]:
            out += props["PolicyDocument"]["Statement"]
    return out


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _denied_send(statements: list[dict], principal_arn: object) -> bool:
    """Whether the queue's policy denies ``sqs:SendMessage`` to a caller whose principal
    ARN is ``principal_arn`` (a template reference, compared as the template states it)."""
    for st in statements:
        if st["Effect"] != "Deny" or "sqs:SendMessage" not in _listed(st["Action"]):
            continue
        assert st["Principal"] in ("*", {"AWS": "*"}), "the deny names every principal"
        conditions = st.get("Condition", {})
        if not conditions:
            return True
        assert set(conditions) == {"ArnNotEquals"} and set(conditions["ArnNotEquals"]) == {"aws:PrincipalArn"}
        if principal_arn not in _listed(conditions["ArnNotEquals"]["aws:PrincipalArn"]):
            return True
    return False


def test_only_the_ingress_role_may_put_a_message_on_the_inbound_queue(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        statements = _queue_policy_statements(synth)
        ingress = {"Fn::GetAtt": [Ids.WHATSAPP_INGRESS_ROLE, "Arn"]}
        assert not _denied_send(statements, ingress)
        others = [{"Fn::GetAtt": [logical_id, "Arn"]} for logical_id in synth.of_type("AWS::IAM::Role")
                  if logical_id != Ids.WHATSAPP_INGRESS_ROLE]
        assert others, "the stack has other roles"
        for arn in [*others, "arn:aws:iam::111122223333:role/atacante", "arn:aws:iam::111122223333:root"]:
            assert _denied_send(statements, arn), f"{arn} may send to the inbound queue"
        # Nothing in the policy allows a send: the ingress's own identity policy is its only way in.
        assert not [st for st in statements if st["Effect"] == "Allow"
                    and any(a.startswith("sqs:") for a in _listed(st["Action"]))]


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

"""The VPC endpoints' policies against the roles of the functions that run in the VPC.

A gateway endpoint applies to every call to its service from the subnets whose
route tables it is attached to, so a call the function's role allows but the
endpoint's policy does not fails in AWS (and nowhere offline: moto applies no
endpoint policy). Both sides are read from the synthesized template: the roles of
the functions with a ``VpcConfig`` and each ``AWS::EC2::VPCEndpoint``'s policy.
"""

from __future__ import annotations

import copy
import json

import pytest

from infra.grants import unscoped
from infra.policy_check import document_pairs, extract_roles, render

pytestmark = pytest.mark.infra

ANYONE = ("*", {"AWS": "*"})


def _service(endpoint: dict) -> str:
    return render(endpoint["Properties"]["ServiceName"]).rsplit(".", 1)[-1]  # com.amazonaws.<region>.<service>


def in_vpc_pairs(template: dict, service: str) -> dict[str, set[tuple[str, str]]]:
    """role logical id -> its (action, resource) pairs on ``service``, for each role of a function in the VPC."""
    roles = extract_roles(template)
    out: dict[str, set[tuple[str, str]]] = {}
    for fn in template["Resources"].values():
        props = fn.get("Properties", {})
        if fn["Type"] != "AWS::Lambda::Function" or not props.get("VpcConfig"):
            continue
        role_id = props["Role"]["Fn::GetAtt"][0]
        out[role_id] = {(a, r) for a, r in roles[role_id].pairs if a.startswith(f"{service}:")}
    return out


def endpoint_gaps(template: dict) -> list[str]:
    """Every way an endpoint's policy differs from what the in-VPC roles need (empty when equal)."""
    gaps: list[str] = []
    for logical_id, endpoint in template["Resources"].items():
        if endpoint["Type"] != "AWS::EC2::VPCEndpoint":
            continue
        service = _service(endpoint)
        document = endpoint["Properties"].get("PolicyDocument")
        if not document:
            gaps.append(f"{logical_id}: no policy (the default allows every {service} call from the VPC)")
            continue
        statements = document["Statement"]
        allows = [s for s in statements if s["Effect"] == "Allow"]
        for stmt in statements:
            if stmt.get("Principal") not in ANYONE:
                gaps.append(f"{logical_id}: a principal the roles' check cannot see: {json.dumps(stmt)}")
            if stmt["Effect"] == "Deny" and (allows or stmt.get("Action") not in (f"{service}:*", "*")):
                gaps.append(f"{logical_id}: a Deny other than 'nothing at all': {json.dumps(stmt)}")
        allowed, problems = document_pairs({"Statement": [{k: v for k, v in s.items() if k != "Principal"}
                                                          for s in allows]}, logical_id)
        gaps += problems
        needed = in_vpc_pairs(template, service)
        for role_id, pairs in sorted(needed.items()):
            for action, resource in sorted(pairs):
                if (action, resource) not in allowed and (action, unscoped(resource)) not in allowed:
                    gaps.append(f"{logical_id} refuses {action} on {resource}, which {role_id} is granted")
        everything = set().union(*needed.values()) if needed else set()
        for pair in sorted(allowed - everything):
            gaps.append(f"{logical_id} allows {pair[0]} on {pair[1]}, which no role in the VPC needs")
    return gaps


@pytest.mark.parametrize("variant", ["default", "bedrock+imported", "teardown=functions", "teardown=database-users"])
def test_every_endpoint_allows_exactly_what_the_functions_in_the_vpc_are_granted(all_synths, variant):
    template = all_synths[variant].template
    assert endpoint_gaps(template) == []
    endpoints = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::VPCEndpoint"]
    if variant == "bedrock+imported":
        assert not endpoints  # the ERP's VPC: its endpoints are the ERP owners' (docs/infrastructure.md)
    else:
        assert [_service(e) for e in endpoints] == ["dynamodb"]


def test_the_profile_tool_may_append_its_audit_record_through_the_endpoint(default_synth):
    """The profile tool (isolated subnets) writes its audit record: its only way to DynamoDB is the endpoint."""
    needed = in_vpc_pairs(default_synth.template, "dynamodb")
    assert ("dynamodb:PutItem", "${AuditTable.Arn}") in needed["AtualizarCadastroRole"]
    assert endpoint_gaps(default_synth.template) == []


def test_the_check_sees_a_missing_and_an_extra_pair(default_synth):
    template = copy.deepcopy(default_synth.template)
    (endpoint,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::VPCEndpoint"]
    statements = endpoint["Properties"]["PolicyDocument"]["Statement"]
    statements.append({"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "dynamodb:Scan",
                       "Resource": {"Fn::GetAtt": ["LedgerTable", "Arn"]}})
    assert any("allows dynamodb:Scan" in g for g in endpoint_gaps(template))
    del endpoint["Properties"]["PolicyDocument"]
    assert any("no policy" in g for g in endpoint_gaps(template))

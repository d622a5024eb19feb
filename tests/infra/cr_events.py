"""Custom-resource events built from a synthesized template, as CloudFormation delivers them.

The tests of a custom resource's handler take their events from here, never
written by hand: ``ResourceProperties`` are the resource's own ``Properties`` in
the template (every one of them, ``ServiceToken`` and ``ServiceTimeout``
included), resolved and turned into strings the way CloudFormation passes them
to the function (a number or a boolean arrives as a string). A property added to
the template reaches these events on the next synth, so the handler's tests and
the deploy cannot drift apart.
"""

from __future__ import annotations

import urllib.parse
import uuid
from typing import Any

REGION = "sa-east-1"
ACCOUNT = "111122223333"
STACK_ID = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/CadenciaAgente/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
PSEUDO = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws", "AWS::StackId": STACK_ID,
          "AWS::StackName": "CadenciaAgente", "AWS::URLSuffix": "amazonaws.com"}


class Unresolvable(ValueError):
    pass


def _resolve(value: Any, resources: dict[str, Any]) -> Any:
    """A template value as CloudFormation would resolve it (the intrinsics this template uses)."""
    if isinstance(value, dict) and len(value) == 1:
        (fn, arg), = value.items()
        if fn == "Ref" and arg in PSEUDO:
            return PSEUDO[arg]
        if fn == "Fn::GetAtt":
            target, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            resource = resources[target]
            if resource["Type"] == "AWS::Lambda::Function" and attribute == "Arn":
                name = resource["Properties"]["FunctionName"]
                return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
            raise Unresolvable(f"Fn::GetAtt {target}.{attribute}")
        if fn == "Fn::Join":
            separator, parts = arg
            return separator.join(_resolve(p, resources) for p in parts)
        if fn.startswith("Fn::") or fn == "Ref":
            raise Unresolvable(f"{fn} {arg!r}")
    if isinstance(value, dict):
        return {k: _resolve(v, resources) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, resources) for v in value]
    return value


def _as_delivered(value: Any) -> Any:
    """CloudFormation passes every scalar property to the function as a string."""
    if isinstance(value, dict):
        return {k: _as_delivered(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_delivered(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def resource_properties(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    resources = template["Resources"]
    return _as_delivered(_resolve(resources[logical_id]["Properties"], resources))


def response_url(logical_id: str, request_id: str) -> str:
    """The pre-signed S3 URL form CloudFormation sends (its response bucket in the region)."""
    key = urllib.parse.quote(f"{STACK_ID}|{logical_id}|{request_id}", safe="")
    return (f"https://cloudformation-custom-resource-response-{REGION.replace('-', '')}.s3.{REGION}.amazonaws.com/"
            f"{key}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261204T120000Z&X-Amz-SignedHeaders=host"
            "&X-Amz-Expires=7200&X-Amz-Credential=AKIAEXAMPLE%2F20261204%2Fsa-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Signature=0123456789abcdef")


def event(template: dict[str, Any], logical_id: str, request_type: str, *, physical_id: str | None = None,
          old_properties: dict[str, Any] | None = None, request_id: str | None = None) -> dict[str, Any]:
    """One event for ``logical_id``: Create, Update (``OldResourceProperties``: the template's
    own unless given) or Delete (with the physical id the resource answered on Create)."""
    if request_type not in ("Create", "Update", "Delete"):
        raise ValueError(request_type)
    request_id = request_id or str(uuid.uuid4())
    properties = resource_properties(template, logical_id)
    out: dict[str, Any] = {
        "RequestType": request_type,
        "ServiceToken": properties["ServiceToken"],
        "ResponseURL": response_url(logical_id, request_id),
        "StackId": STACK_ID,
        "RequestId": request_id,
        "LogicalResourceId": logical_id,
        "ResourceType": template["Resources"][logical_id]["Type"],
        "ResourceProperties": properties,
    }
    if request_type != "Create":
        if physical_id is None:
            raise ValueError("Update and Delete name the physical id the resource answered on Create")
        out["PhysicalResourceId"] = physical_id
    if request_type == "Update":
        out["OldResourceProperties"] = old_properties if old_properties is not None else dict(properties)
    return out

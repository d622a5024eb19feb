"""The stack is split into constructs (infra/base.py ``Flat``) without renaming a
deployed resource: CloudFormation replaces a resource whose logical id changes,
and the ledger, the secrets and the database must never be replaced.

``logical_ids.json`` holds every logical id of the four synthesized variants as
they were before the split; a change to it is a deliberate decision
that a reviewer sees in the diff, with the resources it replaces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aws_cdk import CfnElement, Names

from infra.base import Flat, flat_path, unique_id

pytestmark = pytest.mark.infra

EXPECTED = json.loads((Path(__file__).with_name("logical_ids.json")).read_text())


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_no_deployed_resource_was_renamed(all_synths, variant):
    """Every resource deployed before is still there under the same id (a new tool
    adds resources; a renamed one would be missing here)."""
    missing = set(EXPECTED[variant]) - set(all_synths[variant].resources)
    assert not missing, f"renamed or removed (CloudFormation would replace or delete them): {sorted(missing)}"


def test_unique_id_is_cdks_own_rule(default_synth):
    """Our copy of CDK's (unexported) makeUniqueId, against CDK's public Names.unique_id
    on every construct path of the stack."""
    stack = default_synth.stack
    checked = 0
    for construct in stack.node.find_all():
        components = [scope.node.id for scope in construct.node.scopes[1:]]
        assert unique_id(components) == Names.unique_id(construct), construct.node.path
        checked += 1
    assert checked > 300


def test_flat_constructs_are_left_out_of_the_ids_they_hold(default_synth):
    """Every resource built inside a Flat construct (a tool, the orchestrator, the
    ledger, monitoring) is named as if the construct were not there."""
    stack = default_synth.stack
    inside_flat = [c for c in stack.node.find_all()
                   if isinstance(c, CfnElement) and any(isinstance(s, Flat) for s in c.node.scopes)]
    assert len(inside_flat) > 20
    for element in inside_flat:
        logical_id = stack.resolve(element.logical_id)
        with_flat = unique_id([s.node.id for s in element.node.scopes[2:]])
        assert logical_id != with_flat, element.node.path
        # Either CDK's rule over the path without the Flat constructs, or an id the stack
        # pins (the contract's names: never a generated 8-hex-digit suffix).
        pinned = re.search(r"[0-9A-F]{8}$", logical_id) is None
        assert pinned or logical_id == unique_id(flat_path(element, stack)), element.node.path

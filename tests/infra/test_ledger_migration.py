"""Narrowing the history index on an existing stack: CloudFormation creates or
deletes ONE global secondary index per update and never changes an existing one's
projection, so the migration is two deploys — each must differ from the one before
by exactly one index (docs/performance.md, *Migrating an existing ledger*)."""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from cadencia_shared import ledger
from infra.config import from_mapping
from infra.ledger import Ledger

pytestmark = pytest.mark.infra


def _indexes(**kwargs: bool) -> dict[str, dict]:
    stack = Stack(App(), "LedgerOnly")
    Ledger(stack, "LedgerTable", deletion_protection=True, **kwargs)
    (table,) = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table").values()
    return {g["IndexName"]: g for g in table["Properties"]["GlobalSecondaryIndexes"]}


def test_each_migration_deploy_adds_or_drops_exactly_one_index_and_changes_none():
    before = {g["IndexName"]: g for g in [  # what a stack created before this change has
        {"IndexName": ledger.LEGACY_GSI_BY_CONVERSATION, "Projection": {"ProjectionType": "ALL"}},
        {"IndexName": ledger.GSI_UNSETTLED, "Projection": {"ProjectionType": "ALL"}}]}
    migrating, after = _indexes(keep_legacy_history_index=True), _indexes()
    assert set(migrating) - set(before) == {ledger.GSI_BY_CONVERSATION} and set(before) <= set(migrating)
    assert set(migrating) - set(after) == {ledger.LEGACY_GSI_BY_CONVERSATION} and set(after) <= set(migrating)
    for name in before:  # kept indexes keep their projection
        assert migrating[name]["Projection"] == before[name]["Projection"]
    assert after[ledger.GSI_BY_CONVERSATION]["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["tipo"]}


def test_the_flag_is_read_from_the_context():
    assert from_mapping({}).keep_legacy_history_index is False
    assert from_mapping({"keepLegacyHistoryIndex": "true"}).keep_legacy_history_index is True

"""Narrowing a ledger index on an existing stack: CloudFormation creates or deletes
ONE global secondary index per update and never changes an existing one's
projection, so each narrowing is a new index name and two deploys — every deploy
must differ from the one before by exactly one index, and change no index it keeps
(docs/infrastructure.md, *Migrating the ledger's indexes*)."""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared import ledger
from infra.config import ConfigError, from_mapping
from infra.ledger import Ledger

pytestmark = pytest.mark.infra

ALL = {"ProjectionType": "ALL"}


def _indexes(*kept: str) -> dict[str, dict]:
    stack = Stack(App(), "LedgerOnly")
    Ledger(stack, "LedgerTable", deletion_protection=True, keep_retired_indexes=kept)
    (table,) = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table").values()
    return {g["IndexName"]: g for g in table["Properties"]["GlobalSecondaryIndexes"]}


def _retired(name: str) -> dict:
    partition, sort = ledger.RETIRED_INDEXES[name]
    return {"IndexName": name, "KeySchema": [{"AttributeName": partition, "KeyType": "HASH"},
                                             {"AttributeName": sort, "KeyType": "RANGE"}], "Projection": ALL}


def _assert_one_index_per_deploy(deployed: dict[str, dict], *steps: tuple[str, ...]) -> dict[str, dict]:
    for kept in steps:
        nxt = _indexes(*kept)
        added, dropped = set(nxt) - set(deployed), set(deployed) - set(nxt)
        assert len(added) + len(dropped) == 1, (kept, added, dropped)
        for name in set(nxt) & set(deployed):  # an index kept is the same index
            assert nxt[name] == deployed[name], name
        deployed = nxt
    return deployed


def test_from_the_main_before_this_change_two_deploys_replace_the_unsettled_index():
    before = _indexes(ledger.LEGACY_GSI_UNSETTLED)
    before.pop(ledger.GSI_UNSETTLED)  # what a stack deployed before the unsettled index was narrowed has
    assert before[ledger.LEGACY_GSI_UNSETTLED] == _retired(ledger.LEGACY_GSI_UNSETTLED)
    after = _assert_one_index_per_deploy(before, (ledger.LEGACY_GSI_UNSETTLED,), ())
    assert after == _indexes()
    assert after[ledger.GSI_UNSETTLED]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert after[ledger.GSI_BY_CONVERSATION]["Projection"] == {"ProjectionType": "INCLUDE",
                                                                "NonKeyAttributes": ["tipo"]}


def test_a_stack_mid_way_through_the_history_migration_takes_three_deploys():
    # deploy 1 of the history migration done: porConversa, historicoPorConversa, reembolsosPendentes
    both = (ledger.LEGACY_GSI_BY_CONVERSATION, ledger.LEGACY_GSI_UNSETTLED)
    before = _indexes(*both)
    before.pop(ledger.GSI_UNSETTLED)
    after = _assert_one_index_per_deploy(before, both, (ledger.LEGACY_GSI_UNSETTLED,), ())
    assert after == _indexes()


def test_one_deploy_with_both_successors_missing_is_what_the_docs_forbid():
    # A stack from before the history index (porConversa + reembolsosPendentes only)
    # would get two new indexes from this code in one update: CloudFormation refuses
    # it, so it first finishes the history migration on the release that introduced it.
    old = {name: _retired(name) for name in ledger.RETIRED_INDEXES}
    new = _indexes(*ledger.RETIRED_INDEXES)
    assert set(new) - set(old) == {ledger.GSI_BY_CONVERSATION, ledger.GSI_UNSETTLED}


def test_the_flag_is_read_from_the_context_and_an_unknown_name_is_refused():
    assert from_mapping({}).keep_retired_indexes == ()
    assert from_mapping({"keepRetiredIndexes": "reembolsosPendentes"}).keep_retired_indexes == ("reembolsosPendentes",)
    assert from_mapping({"keepRetiredIndexes": "reembolsosPendentes, porConversa"}).keep_retired_indexes \
        == ("porConversa", "reembolsosPendentes")
    # the history migration's flag, as first documented, still means porConversa
    assert from_mapping({"keepLegacyHistoryIndex": "true"}).keep_retired_indexes == ("porConversa",)
    with pytest.raises(ConfigError, match="retired"):
        from_mapping({"keepRetiredIndexes": "reembolsosPendente"})
    with pytest.raises(ConfigError):  # a live index is not retired: keeping it twice is not a thing
        from_mapping({"keepRetiredIndexes": ledger.GSI_UNSETTLED})


def test_the_table_definition_refuses_an_unknown_retired_index():
    with pytest.raises(ValueError, match="retired"):
        ledger.table_definition("t", retired_indexes=("historicoPorConversa",))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30).filter(lambda t: "," not in t), max_size=4))
def test_any_flag_value_keeps_only_retired_indexes_or_is_refused(names):
    try:
        kept = from_mapping({"keepRetiredIndexes": ",".join(names)}).keep_retired_indexes
    except ConfigError:
        assert {n.strip() for n in names} - set(ledger.RETIRED_INDEXES)
        return
    assert set(kept) == {n.strip() for n in names if n.strip()} <= set(ledger.RETIRED_INDEXES)

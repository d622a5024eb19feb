"""Behaviour kept or fixed where the type checker made the code state its types (pyproject's [tool.mypy])."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import given
from hypothesis import strategies as st

from cadencia_shared.dynamo_types import failed_condition_item
from cadencia_shared.ledger import ClaimTaken, Ledger
from canal_whatsapp.resends import MAX_DELAY_S, delay_s

from .support.moto_ledger import ledger_table_in_process

TABLE = "ledger-typed-edges"
KEY = "conv-typed#PED-1001#reembolso"


class DeletesTheClaimFirst:
    """A DynamoDB client whose conditional PutItem loses to a writer that deletes the claim:
    the condition fails, and by the time it is read the claim is gone (no ALL_OLD item either)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        try:
            return dict(self.client.put_item(**kwargs))
        except ClientError as err:
            self.client.delete_item(TableName=TABLE, Key={"pk": kwargs["Item"]["pk"]})
            error = dict(err.response["Error"])
            raise ClientError({"Error": error}, "PutItem") from None  # a reply without Item


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with ledger_table_in_process(monkeypatch, TABLE) as moto_client:
        yield moto_client


def _claim(ledger: Ledger) -> None:
    ledger.claim_refund(key=KEY, conversation_id="conv-typed", order_id="PED-1001", customer_id=7,
                        amount=Decimal("10.00"), lease_s=60)


def test_a_taken_claim_is_answered_with_the_claim(client: Any) -> None:
    ledger = Ledger(TABLE, client)
    _claim(ledger)
    with pytest.raises(ClaimTaken):
        _claim(ledger)


def test_a_claim_gone_after_its_condition_failed_surfaces_the_error(client: Any) -> None:
    _claim(Ledger(TABLE, client))
    with pytest.raises(ClientError) as raised:
        _claim(Ledger(TABLE, DeletesTheClaimFirst(client)))  # a DynamoClient by duck typing
    assert raised.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_failed_condition_item_reads_only_a_mapping() -> None:
    item = {"pk": {"S": "x"}}
    assert failed_condition_item(ClientError({"Error": {"Code": "C"}, "Item": item}, "PutItem")) == item
    assert failed_condition_item(ClientError({"Error": {"Code": "C"}}, "PutItem")) is None
    assert failed_condition_item(ClientError({"Error": {"Code": "C"}, "Item": "x"}, "PutItem")) is None  # hostile shape


@given(st.integers(min_value=-5, max_value=200), st.integers(min_value=0, max_value=900))
def test_the_resend_delay_doubles_from_its_base_and_is_capped(deferrals: int, base_s: int) -> None:
    assert delay_s(deferrals, base_s) == min(MAX_DELAY_S, base_s * 2 ** max(0, min(deferrals - 1, 20)))

"""A writer links after the head it appended last without reading the chain, and a
stale guess costs a failed conditional put and a read, never a fork. Real moto
server; the client is wrapped only to count its calls."""

from __future__ import annotations

import uuid

import pytest

from cadencia_shared.audit_chain import HEAD_MEMORY_S, AuditChain, table_definition
from scripts.local_stack.aws import session_client

CONV = "conv-memoria"


class CountingClient:
    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner, self.calls = inner, []

    def __getattr__(self, name: str):  # noqa: ANN204
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.calls.append(name)
            return attr(*args, **kwargs)
        return counted


@pytest.fixture
def table(local_stack):
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    name = f"auditoria-memoria-{uuid.uuid4().hex[:10]}"
    ddb.create_table(**table_definition(name))
    yield name, ddb
    ddb.delete_table(TableName=name)


def test_a_turns_links_cost_one_read_then_puts_only(table):
    name, ddb = table
    client = CountingClient(ddb)
    chain = AuditChain(name, client)
    for i in range(4):
        chain.append(conversation_id=CONV, event="DECISAO", details={"i": i})
    assert client.calls.count("query") == 1 and client.calls.count("put_item") == 4
    assert chain.verify(CONV) == (4, None)


def test_a_stale_head_loses_the_put_and_links_after_the_other_writer(table):
    name, ddb = table
    client = CountingClient(ddb)
    mine, other = AuditChain(name, client), AuditChain(name, ddb)
    mine.append(conversation_id=CONV, event="DECISAO", details={"de": "mim"})
    other.append(conversation_id=CONV, event="DECISAO", details={"de": "outro"})
    client.calls.clear()
    assert mine.append(conversation_id=CONV, event="DECISAO", details={"de": "mim"}) == 3
    assert client.calls == ["put_item", "query", "put_item"]  # the guess (seq 2) refused, then read
    records = list(mine.records(CONV))
    assert [r["seq"] for r in records] == [1, 2, 3] and records[2]["hashAnterior"] == records[1]["hash"]
    assert mine.verify(CONV) == (3, None)


def test_an_old_head_is_not_guessed_on(table):
    name, ddb = table
    now = [1_000_000.0]
    client = CountingClient(ddb)
    chain = AuditChain(name, client, clock=lambda: now[0])
    chain.append(conversation_id=CONV, event="DECISAO", details={})
    now[0] += HEAD_MEMORY_S + 1
    client.calls.clear()
    chain.append(conversation_id=CONV, event="DECISAO", details={})
    assert client.calls == ["query", "put_item"]

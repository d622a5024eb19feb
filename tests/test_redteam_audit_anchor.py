"""Red team (redteam2) on the audit chain's head anchor: a deleted tail must stay
reported after the conversation goes on. On main (19039d6) the legitimate writer
re-used the deleted seqs, its anchor update failed (the anchor was ahead), and the
first append past the old head moved the anchor onto the rewritten chain: the
deletion vanished from ``verificar``.

Since a writer links after the head it appended last (``HEAD_MEMORY_S``), the
conversation can go on in two ways: another instance (or the same one later) reads
the chain and re-uses the deleted seqs — the anchor reports it; the same instance
within its memory links after the deleted head — the gap reports it.
"""

from __future__ import annotations

import pytest

from cadencia_shared.audit_chain import AuditChain
from tests.test_audit_chain import (  # noqa: F401
    CONV, _anchored_verifier, _delete, _fill, anchored, audit, run_to_completion)


def _another_instance(chain: AuditChain) -> AuditChain:
    return AuditChain(chain.table_name, chain.client, anchor_table=chain.anchor_table)


@pytest.mark.parametrize(("deleted", "appended_after"), [((5,), 2), ((4, 5), 3), ((1, 2, 3, 4, 5), 7)])
def test_a_deleted_tail_stays_reported_when_the_conversation_goes_on(anchored, deleted, appended_after):
    _fill(anchored)
    _delete(anchored, *deleted)
    writer = _another_instance(anchored)  # reads the chain: re-uses the deleted seqs
    for i in range(appended_after):  # the orchestrator keeps auditing the conversation
        writer.append(conversation_id=CONV, event="DECISAO", details={"depois": i})
    checked, broken = anchored.verify(CONV)
    assert broken is not None and broken.problem == "ancora_divergente" and broken.seq == 5


@pytest.mark.parametrize(("deleted", "appended_after"), [((5,), 2), ((4, 5), 3), ((1, 2, 3, 4, 5), 7)])
def test_a_deleted_tail_is_a_gap_when_the_same_writer_goes_on(anchored, deleted, appended_after):
    _fill(anchored)  # this instance remembers seq 5 as the head
    _delete(anchored, *deleted)
    for i in range(appended_after):
        anchored.append(conversation_id=CONV, event="DECISAO", details={"depois": i})
    checked, broken = anchored.verify(CONV)
    assert broken is not None and (broken.problem, broken.seq) == ("faltando", min(deleted))


def test_the_verifier_reports_it_too(anchored, local_stack):
    _fill(anchored)
    _delete(anchored, 5)
    writer = _another_instance(anchored)
    for i in range(2):
        writer.append(conversation_id=CONV, event="DECISAO", details={"depois": i})
    out = _anchored_verifier(local_stack, anchored, "--conversa", CONV)
    assert out.returncode == 1 and "seq=5 (ancora_divergente)" in out.stdout, out.stdout


def _append_anchored(endpoint: str, table: str, ledger_table: str, writer: int, n: int) -> None:
    from cadencia_shared.audit_chain import AuditChain
    from scripts.local_stack.aws import session_client

    chain = AuditChain(table, session_client("dynamodb", endpoint), anchor_table=ledger_table)
    for i in range(n):
        chain.append(conversation_id=CONV, event="DECISAO", details={"escritor": writer, "i": i})


def test_concurrent_anchored_writers_leave_the_anchor_at_the_last_record(anchored, local_stack):
    """The anchor now moves only from a link it can prove: four processes racing on
    one chain still leave it on the chain's last record (no writer was killed)."""
    run_to_completion(_append_anchored, [(local_stack.aws_endpoint, anchored.table_name, anchored.anchor_table, w, 10)
                                         for w in range(4)])
    records = list(anchored.records(CONV))
    assert anchored.verify(CONV) == (40, None)
    assert (anchored.head(CONV).seq, anchored.head(CONV).hash) == (40, records[-1]["hash"])

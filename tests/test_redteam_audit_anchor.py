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
from cadencia_shared.ledger import Ledger
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from tests.test_audit_chain import CONV, _anchored_verifier, _delete, _fill, anchored, audit, run_to_completion  # noqa: F401

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build


def _another_instance(chain: AuditChain) -> AuditChain:
    return AuditChain(chain.table_name, chain.client, anchor_table=chain.anchor_table)


@pytest.mark.parametrize(("deleted", "appended_after"), [((5,), 2), ((4, 5), 3), ((1, 2, 3, 4, 5), 7)])
def test_a_deleted_tail_stays_reported_when_the_conversation_goes_on(anchored, deleted, appended_after):
    _fill(anchored)
    _delete(anchored, *deleted)
    writer = _another_instance(anchored)  # reads the chain: re-uses the deleted seqs
    for i in range(appended_after):  # the orchestrator keeps auditing the conversation
        writer.append(conversation_id=CONV, event="DECISAO", details={"depois": i})
    _checked, broken = anchored.verify(CONV)
    assert broken is not None and broken.problem == "ancora_divergente" and broken.seq == 5


@pytest.mark.parametrize(("deleted", "appended_after"), [((5,), 2), ((4, 5), 3), ((1, 2, 3, 4, 5), 7)])
def test_a_deleted_tail_is_a_gap_when_the_same_writer_goes_on(anchored, deleted, appended_after):
    _fill(anchored)  # this instance remembers seq 5 as the head
    _delete(anchored, *deleted)
    for i in range(appended_after):
        anchored.append(conversation_id=CONV, event="DECISAO", details={"depois": i})
    _checked, broken = anchored.verify(CONV)
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


# --- a link appended after every anchor (a forged tail) ------------------------------


def _forge(chain: AuditChain, conversation: str = CONV) -> None:
    """A well-formed link (right seq, right previous hash, right hash) put by an identity
    that can write the audit table but moves no anchor."""
    AuditChain(chain.table_name, chain.client).append(conversation_id=conversation, event="APROVACAO_DECIDIDA",
                                                       details={"aprovador": "mallory"})


def test_a_forged_link_after_the_anchored_head_is_flagged(anchored, local_stack):
    _fill(anchored, 3)
    _forge(anchored)
    report = anchored.check(CONV)
    assert (report.checked, report.broken, report.unanchored) == (4, None, 1)
    out = _anchored_verifier(local_stack, anchored, "--conversa", CONV)
    assert out.returncode == 4, out.stdout + out.stderr
    assert "seq=4..4" in out.stdout and "sem âncora" in out.stdout and "íntegra (" not in out.stdout


def test_a_forged_link_after_the_turns_commit_is_flagged(anchored, local_stack):
    """The orchestrator's turn anchors its links in its fenced commit (the conversation
    item); a link put after that commit, that no anchor acknowledges, is flagged."""
    conv = "conv-forjada"
    ledger = Ledger(anchored.anchor_table, anchored.client, audit_chain=anchored)
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}),
                          text_reply("Consultei aqui."))
    orch, _ = build(model, ledger, CountingInvoker())
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="wamid.f1", mensagem="status"),
                Deadline.after(60))
    clean = anchored.check(conv)
    assert clean.broken is None and clean.unanchored == 0 and clean.checked >= 1
    assert _anchored_verifier(local_stack, anchored, "--conversa", conv).returncode == 0
    _forge(anchored, conv)
    report = anchored.check(conv)
    assert (report.broken, report.unanchored) == (None, 1)
    assert _anchored_verifier(local_stack, anchored, "--conversa", conv).returncode == 4


def test_what_the_chain_does_not_cover_a_writer_role_that_also_anchors(anchored):
    """The documented limit: an identity holding a writer's grants (PutItem on the audit
    table AND UpdateItem on the ``auditoria-cabeca#`` anchor) appends exactly as a
    legitimate writer does; the chain cannot tell its link apart (CloudTrail data events
    on the audit table name the role that put each seq)."""
    _fill(anchored, 3)
    AuditChain(anchored.table_name, anchored.client, anchor_table=anchored.anchor_table).append(
        conversation_id=CONV, event="APROVACAO_DECIDIDA", details={"aprovador": "mallory"})
    report = anchored.check(CONV)
    assert (report.checked, report.broken, report.unanchored) == (4, None, 0)

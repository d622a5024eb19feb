"""Red team (redteam2) on the audit chain's head anchor: a deleted tail must stay
reported after the conversation goes on. On main (19039d6) the legitimate writer
re-used the deleted seqs, its anchor update failed (the anchor was ahead), and the
first append past the old head moved the anchor onto the rewritten chain: the
deletion vanished from ``verificar``.
"""

from __future__ import annotations

import pytest

from tests.test_audit_chain import CONV, _anchored_verifier, _delete, _fill, anchored, audit  # noqa: F401


@pytest.mark.parametrize(("deleted", "appended_after"), [((5,), 2), ((4, 5), 3), ((1, 2, 3, 4, 5), 7)])
def test_a_deleted_tail_stays_reported_when_the_conversation_goes_on(anchored, deleted, appended_after):
    _fill(anchored)
    _delete(anchored, *deleted)
    for i in range(appended_after):  # the orchestrator keeps auditing the conversation
        anchored.append(conversa_id=CONV, evento="DECISAO", detalhes={"depois": i})
    checked, broken = anchored.verify(CONV)
    assert broken is not None and broken.problem == "ancora_divergente" and broken.seq == 5


def test_the_verifier_reports_it_too(anchored, local_stack):
    _fill(anchored)
    _delete(anchored, 5)
    for i in range(2):
        anchored.append(conversa_id=CONV, evento="DECISAO", detalhes={"depois": i})
    out = _anchored_verifier(local_stack, anchored, "--conversa", CONV)
    assert out.returncode == 1 and "seq=5 (ancora_divergente)" in out.stdout, out.stdout

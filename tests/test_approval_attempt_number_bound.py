"""``tentativaNumero`` on an approval record — the retry ceiling's number the approved
call runs under — is bound like the arguments: it is part of the record's id, so a
record whose number was edited or removed is not intact (never decided, never
consumed, never run, shown as invalid), and an edit landing after a decision or a
consumption read the record fails their conditional write. Real SDK with a scripted
model, real ledger on moto, real refund Lambda handler, PostgreSQL and gateway."""

from __future__ import annotations

import uuid

import pytest

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore, DecisionRefused
from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import approval_pk
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build
from .test_approval_at_ceiling import ABOVE, FIFTY, POLICY, _approval, _approve, _invoker, _turn

EDITS = {
    "removed": ("REMOVE tentativaNumero", {}),
    "lowered": ("SET tentativaNumero = :n", {":n": {"N": "1"}}),
    "not a number": ("SET tentativaNumero = :n", {":n": {"S": "4"}}),
}


def _asked_on_the_fourth_attempt(mocked_aws, gateway, tools, conv: str):
    """Three refunds of R$ 50 fail before the gateway (attempts 1-3); the 4th, R$ 150, asks a person."""
    ledger = mocked_aws["ledger"]
    envs = {name: tools.environment(spec) for name, spec in TOOLS.items()}
    model = ScriptedModel(
        *(tool_use("emitir_reembolso", FIFTY) for _ in range(3)), tool_use("emitir_reembolso", ABOVE), text_reply("x")
    )
    orch, _ = build(model, ledger, _invoker(envs, gateway_down=True), **POLICY)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    record = _approval(ledger, conv)
    assert record.attempt_number == 4 and record.id.endswith("-4") and record.intact
    return ledger, envs, record


def _edit(mocked_aws, ledger, approval: str, edit: str) -> None:
    expression, values = EDITS[edit]
    mocked_aws["dynamodb"].update_item(
        TableName=ledger.table_name,
        Key={"pk": {"S": approval_pk(approval)}},
        UpdateExpression=expression,
        **({"ExpressionAttributeValues": values} if values else {}),
    )


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_approved_record_with_an_edited_attempt_number_never_runs(mocked_aws, gateway, tools, edit):
    conv = f"tentativa-editada-{uuid.uuid4().hex[:8]}"
    ledger, envs, record = _asked_on_the_fourth_attempt(mocked_aws, gateway, tools, conv)
    _approve(ledger, record.id)
    _edit(mocked_aws, ledger, record.id, edit)
    edited = ApprovalStore(ledger).get(record.id)
    assert not edited.intact
    assert ApprovalStore(ledger).consume(edited) is False
    healthy, _ = build(ScriptedModel(), ledger, _invoker(envs), **POLICY)
    resumed = Resumer.of(healthy).resume(record.id, Deadline.after(60))
    assert (resumed.reason, resumed.status) == ("aprovacao_inutilizavel", "aguardando_humano")
    assert gateway.debits_for(conv) == []
    assert ApprovalStore(ledger).get(record.id).status is ApprovalStatus.APPROVED  # never consumed
    assert [a["tentativaNumero"] for a in ledger.attempts(conv) if a["ferramenta"] == "emitir_reembolso"] == [
        1,
        2,
        3,
        4,
    ]


def test_a_pending_record_with_an_edited_attempt_number_is_never_decided(mocked_aws, gateway, tools):
    conv = f"tentativa-editada-pendente-{uuid.uuid4().hex[:8]}"
    ledger, _, record = _asked_on_the_fourth_attempt(mocked_aws, gateway, tools, conv)
    _edit(mocked_aws, ledger, record.id, "lowered")
    with pytest.raises(DecisionRefused) as refused:
        _approve(ledger, record.id)
    assert refused.value.reason == "aprovacao_invalida"
    assert ApprovalStore(ledger).get(record.id).status is ApprovalStatus.PENDING


def test_an_edit_after_the_record_was_read_fails_the_consumption(mocked_aws, gateway, tools):
    """The consumption's condition pins the number read: an edit in between (even one
    that a later read would judge) is refused by the write itself."""
    conv = f"tentativa-editada-corrida-{uuid.uuid4().hex[:8]}"
    ledger, _, record = _asked_on_the_fourth_attempt(mocked_aws, gateway, tools, conv)
    _approve(ledger, record.id)
    read = ApprovalStore(ledger).get(record.id)
    assert read.intact and read.status is ApprovalStatus.APPROVED
    _edit(mocked_aws, ledger, record.id, "lowered")
    assert ApprovalStore(ledger).consume(read) is False
    assert ApprovalStore(ledger).get(record.id).status is ApprovalStatus.APPROVED


# -- by property: only the number in the id is intact ----------------------------------

from decimal import Decimal  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import settings as hsettings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cadencia_shared.approvals import ApprovalRecord, canonical_arguments  # noqa: E402
from cadencia_shared.ledger import approval_id  # noqa: E402

STORED = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=1000).map(Decimal),
    st.decimals(allow_nan=False, allow_infinity=False, places=1, min_value=-5, max_value=1000),
    st.text(max_size=4),
)


def _numbered_item(number: int, stored) -> dict:
    text, digest = canonical_arguments({"pedidoId": "4821", "valor": 150.0})
    item = {
        "aprovacaoId": approval_id("conv-n", "emitir_reembolso", "v1", digest, number),
        "ferramenta": "emitir_reembolso",
        "versaoFerramenta": "v1",
        "argumentos": text,
        "argumentosSha256": digest,
        "conversaId": "conv-n",
        "clienteId": Decimal(1001),
        "valor": Decimal("150.0"),
        "motivo": "acima_do_limite",
        "status": "aprovada",
        "criadoEm": "2027-01-01T00:00:00.000Z",
        "expiraEmMs": Decimal(1),
    }
    return item if stored is None else {**item, "tentativaNumero": stored}


@hsettings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=999), STORED)
def test_a_stored_attempt_number_other_than_the_ids_is_never_intact(number, stored):
    record = ApprovalRecord.from_item(_numbered_item(number, stored))
    genuine = isinstance(stored, Decimal) and not isinstance(stored, bool) and stored == number
    assert record.intact == genuine
    if genuine:
        assert record.attempt_number == number

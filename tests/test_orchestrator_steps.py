"""``steps.next_step``: the one place a model response becomes the next step.
Pure, so tested without the local stack, on the SDK's own block types."""

from __future__ import annotations

from types import SimpleNamespace

from anthropic.types import TextBlock, ToolUseBlock
from hypothesis import assume, given
from hypothesis import strategies as st

from orchestrator import money_sentences as ms
from orchestrator import texts
from orchestrator.output_contract import ReplyCheck
from orchestrator.steps import Correct, HandOff, Reply, RunAgain, RunTools, ShrinkContext, next_step

KNOWN = {"end_turn", "stop_sequence", "tool_use", "pause_turn", "max_tokens", "refusal",
         "model_context_window_exceeded"}
TEXT = TextBlock(type="text", text="Consultei aqui; posso ajudar em algo mais?")
CALL = ToolUseBlock(type="tool_use", id="toolu_01", name="consultar_status_pedido", input={"pedidoId": "4821"})


def _stored(block) -> dict:
    """A block as the history stores it."""
    return block.model_dump(mode="json", exclude_none=True)


def _response(stop: str, *blocks) -> SimpleNamespace:
    return SimpleNamespace(stop_reason=stop, content=list(blocks))


class _NothingDone:
    """Evidence of a conversation where no tool did anything (steps are pure: the
    ledger-backed evidence is exercised in tests/test_output_contract.py)."""

    def refund_claim(self, conversation_id, order_id):
        return None

    def profile_updated(self, conversation_id, customer_id):
        return False

    def refund_results(self, conversation_id, order_id):
        return []

    def pending_approval_amount(self, conversation_id, arguments):
        return None


def _check(max_attempts: int = 3) -> ReplyCheck:
    return ReplyCheck("c-1", 1001, _NothingDone(), max_attempts)


ANSWER = ToolUseBlock(type="tool_use", id="toolu_02", name="responder_cliente",
                      input={"texto": TEXT.text, "precisaDePessoa": False, "declaracoes": []})


def test_each_stop_reason_has_its_step():
    delivered = next_step(_response("tool_use", ANSWER), _check())
    assert isinstance(delivered, Reply) and (delivered.text, delivered.reason) == (TEXT.text, "resposta")
    assert delivered.record[0] == {"role": "assistant", "content": [_stored(ANSWER)]}
    assert delivered.record[1]["content"][0]["is_error"] is False
    for stop in ("end_turn", "stop_sequence"):  # free text is never delivered
        assert isinstance(next_step(_response(stop, TEXT), _check()), Correct)
    assert isinstance(next_step(_response("end_turn"), _check()), Correct)
    tools = next_step(_response("tool_use", TEXT, CALL), _check())
    assert isinstance(tools, RunTools) and tools.blocks == [TEXT, CALL] and len(tools.content) == 2
    assert next_step(_response("pause_turn", CALL), _check()) == RunAgain([_stored(CALL)])
    assert isinstance(next_step(_response("refusal", TEXT), _check()), HandOff)
    assert next_step(_response("model_context_window_exceeded"), _check()) == ShrinkContext()


def test_a_final_answer_asking_for_a_person_hands_off_with_the_checked_text():
    answer = ToolUseBlock(type="tool_use", id="toolu_03", name="responder_cliente",
                          input={**ANSWER.input, "precisaDePessoa": True})
    step = next_step(_response("tool_use", answer), _check())
    assert isinstance(step, HandOff) and (step.text, step.reason) == (TEXT.text, "modelo_pediu_pessoa")


def test_a_final_answer_beside_another_call_runs_nothing_and_is_refused():
    step = next_step(_response("tool_use", CALL, ANSWER), _check())
    assert isinstance(step, Correct)
    results = step.record[1]["content"]
    assert [r["tool_use_id"] for r in results] == ["toolu_01", "toolu_02"] and all(r["is_error"] for r in results)
    assert step.diagnosis.audit[1]["violacoes"] == ["resposta_com_outras_chamadas"]


def test_the_last_allowed_refusal_is_the_fallback_and_counts_both():
    check = _check(max_attempts=2)
    assert isinstance(next_step(_response("end_turn", TEXT), check), Correct)
    last = next_step(_response("end_turn", TEXT), check)
    assert isinstance(last, Reply) and (last.text, last.reason) == (ms.fallback([]), "contrato_de_saida")
    assert ms.NOTHING_TO_CONFIRM in last.text  # nothing was done in this conversation: the fallback says so
    assert last.diagnosis.contract == ("violacao", "fallback")
    assert last.diagnosis.audit[0] == "CONTRATO_DE_SAIDA_FALLBACK"


def test_max_tokens_never_delivers_a_cut_off_text_nor_runs_a_cut_off_call():
    for blocks in ((TEXT,), (TEXT, CALL), (ANSWER,)):
        step = next_step(_response("max_tokens", *blocks), _check())
        assert (step.text, step.reason, step.record) == (texts.TRUNCATED, "max_tokens", ())
        assert step.diagnosis.error_class == "max_tokens"


@given(stop=st.text(max_size=40))
def test_an_unknown_stop_reason_is_a_clean_failure_never_a_guess(stop):
    assume(stop not in KNOWN)
    step = next_step(_response(stop, TEXT, CALL), _check())
    assert isinstance(step, Reply)
    assert (step.text, step.reason, step.record) == (texts.MODEL_UNAVAILABLE, "stop_reason_desconhecido", ())
    assert step.diagnosis.warning == {"stop_reason": stop}

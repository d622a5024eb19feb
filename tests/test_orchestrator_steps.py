"""``steps.next_step``: the one place a model response becomes the next step.
Pure, so tested without the local stack, on the SDK's own block types."""

from __future__ import annotations

from types import SimpleNamespace

from anthropic.types import TextBlock, ToolUseBlock
from hypothesis import assume, given
from hypothesis import strategies as st

from orchestrator import texts
from orchestrator.steps import HandOff, Reply, RunAgain, RunTools, ShrinkContext, next_step

KNOWN = {"end_turn", "stop_sequence", "tool_use", "pause_turn", "max_tokens", "refusal",
         "model_context_window_exceeded"}
TEXT = TextBlock(type="text", text="Seu pedido saiu para entrega.")
CALL = ToolUseBlock(type="tool_use", id="toolu_01", name="consultar_status_pedido", input={"pedidoId": "4821"})


def _stored(block) -> dict:
    """A block as the history stores it."""
    return block.model_dump(mode="json", exclude_none=True)


def _response(stop: str, *blocks) -> SimpleNamespace:
    return SimpleNamespace(stop_reason=stop, content=list(blocks))


def test_each_stop_reason_has_its_step():
    assert next_step(_response("end_turn", TEXT)) == Reply(TEXT.text, "resposta", keep=[_stored(TEXT)])
    assert next_step(_response("stop_sequence")) == Reply(texts.EMPTY_REPLY, "resposta", keep=None)
    tools = next_step(_response("tool_use", TEXT, CALL))
    assert isinstance(tools, RunTools) and tools.blocks == [TEXT, CALL] and len(tools.content) == 2
    assert next_step(_response("pause_turn", CALL)) == RunAgain([_stored(CALL)])
    assert isinstance(next_step(_response("refusal", TEXT)), HandOff)
    assert next_step(_response("model_context_window_exceeded")) == ShrinkContext()


def test_max_tokens_keeps_a_text_only_answer_and_never_a_cut_off_call():
    kept = next_step(_response("max_tokens", TEXT))
    assert (kept.text, kept.reason, kept.keep) == (TEXT.text, "max_tokens", [_stored(TEXT)])
    cut = next_step(_response("max_tokens", TEXT, CALL))
    assert (cut.text, cut.keep) == (texts.TRUNCATED, None)
    assert kept.diagnosis.error_class == cut.diagnosis.error_class == "max_tokens"


@given(stop=st.text(max_size=40))
def test_an_unknown_stop_reason_is_a_clean_failure_never_a_guess(stop):
    assume(stop not in KNOWN)
    step = next_step(_response(stop, TEXT, CALL))
    assert isinstance(step, Reply)
    assert (step.text, step.reason, step.keep) == (texts.MODEL_UNAVAILABLE, "stop_reason_desconhecido", None)
    assert step.diagnosis.warning == {"stop_reason": stop}

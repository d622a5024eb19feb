"""The stepped history cut (``HISTORICO_APOS_CORTE``) and the context-window shrink, on
any history the orchestrator can store (tool rounds, a reply that failed after its tools
ran and the next customer text merged into the results, a person's reply written as the
agent's turn, a shrink): what is sent never starts with an assistant message or a
tool_result, and never leaves a tool_use without its tool_result (the API refuses all three)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator import history

from .test_redteam7_cache_prefix_probe import _assert_valid_history

_ids = itertools.count()


def _tool_round(messages: list[dict], calls: int) -> list[dict]:
    ids = [f"toolu_{next(_ids)}" for _ in range(calls)]
    out = history.extend(messages, [{"role": "assistant", "content": [
        {"type": "tool_use", "id": i, "name": "consultar_status_pedido", "input": {}} for i in ids]}])
    results = [history.tool_result(i, "{}", is_error=False) for i in ids]
    return history.extend(out, [{"role": "user", "content": results}])


EVENTS = st.lists(st.sampled_from(["customer", "round1", "round2", "answer", "person"]), min_size=1, max_size=60)


def _build(events: list[str]) -> list[dict]:
    messages = history.append_user_text([], "oi")
    for event in events:
        if event == "customer":
            messages = history.append_user_text(messages, "de novo")
        elif event.startswith("round") and messages[-1]["role"] == "user":
            messages = _tool_round(messages, int(event[-1]))
        elif event == "answer" and messages[-1]["role"] == "user":
            messages = history.extend(messages, [{"role": "assistant", "content": [{"type": "text", "text": "ok"}]}])
        elif event == "person":
            messages = history.append_assistant_text(messages, "Sou a Ana, do atendimento.")
    return messages


@settings(max_examples=400, deadline=None)
@given(EVENTS, st.integers(4, 30), st.integers(2, 29))
def test_the_stepped_cut_keeps_the_history_one_the_api_accepts(events, max_messages, after_cut):
    after_cut = min(after_cut, max_messages - 1)
    messages = history.append_user_text(_build(events), "mensagem nova")
    _assert_valid_history(messages)
    kept = history.trim_in_steps(messages, max_messages, after_cut)
    _assert_valid_history(kept)
    assert kept[-1]["content"][-1] == messages[-1]["content"][-1]  # the current customer text is always sent
    shrunk = history.trim(kept, max(2, len(kept) // 2))
    _assert_valid_history(shrunk)

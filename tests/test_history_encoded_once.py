"""``history.for_storage`` encodes the history once and trims exactly as before.

The bound used to encode the whole history to measure it, again on every pass of the
turn-cutting loop, and the commit encoded it once more. Now the list is encoded once and,
under the bound, the commit compresses those bytes; over it, each message is encoded once
and the list's size follows from theirs.
The trimming must not change: ``_bounded_before`` is the implementation it replaced,
kept here as the oracle, and hypothesis compares the two on random histories (merged
customer texts, tool calls and results, string contents, non-ASCII text, tight bounds).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared.ledger import EncodedHistory
from cadencia_shared.ledger.table import compressed_json, from_compressed_json
from orchestrator import history

from .test_redteam_history_growth import _TURN, _history_of


def _size_before(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _bounded_before(messages: list, max_bytes: int, *, cut_turns: bool = True) -> list:
    """orchestrator.history.bounded as it was (commit 0153832), verbatim but for the names."""
    out, size = list(messages), _size_before(messages)
    while cut_turns and size > max_bytes and len(out) > 1:
        shorter = history.trim(out, len(out) - 1)
        if len(shorter) == len(out):
            break
        out, size = shorter, _size_before(shorter)
    for index, message in enumerate(out):
        if size <= max_bytes:
            break
        blocks = history._blocks(message["content"])
        while size > max_bytes and len(blocks) > 1:
            oldest_text = next((i for i, b in enumerate(blocks[:-1]) if b.get("type") == "text"), None)
            if oldest_text is None:
                break
            size -= _size_before(blocks[oldest_text]) + 1
            blocks = blocks[:oldest_text] + blocks[oldest_text + 1:]
        if len(blocks) != len(history._blocks(message["content"])):
            out[index] = {**message, "content": blocks}
    return out


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)
_BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _TEXT),
    st.builds(lambda i: {"type": "tool_use", "id": f"toolu_{i}", "name": "consultar_status_pedido",
                         "input": {"pedidoId": str(i)}}, st.integers(0, 9)),
    st.builds(lambda i, t: history.tool_result(f"toolu_{i}", t, is_error=False), st.integers(0, 9), _TEXT),
)
# Any list of messages, valid for the Messages API or not: the two must agree on all of them.
_MESSAGE = st.builds(lambda role, content: {"role": role, "content": content},
                     st.sampled_from(["user", "assistant"]), st.one_of(_TEXT, st.lists(_BLOCK, max_size=5)))


def _assert_same_as_before(messages: list, max_bytes: int, cut: bool) -> None:
    before = json.dumps(messages)
    stored = history.for_storage(messages, max_bytes, cut_turns=cut)
    assert json.dumps(messages) == before  # the input is not changed
    assert stored.messages == _bounded_before(messages, max_bytes, cut_turns=cut)
    assert stored.encoded == json.dumps(stored.messages, ensure_ascii=False, separators=(",", ":")).encode()
    assert history.bounded(messages, max_bytes, cut_turns=cut) == stored.messages


@settings(max_examples=400, deadline=None)
@given(messages=st.lists(_MESSAGE, max_size=10), max_bytes=st.integers(0, 3_000), cut=st.booleans())
def test_any_message_list_is_trimmed_exactly_as_before(messages, max_bytes, cut):
    _assert_same_as_before(messages, max_bytes, cut)


@settings(max_examples=200, deadline=None)
@given(turns=st.lists(_TURN, min_size=1, max_size=12), max_bytes=st.integers(50, 20_000), cut=st.booleans())
def test_conversation_histories_are_trimmed_exactly_as_before(turns, max_bytes, cut):
    _assert_same_as_before(_history_of(turns), max_bytes, cut)


def test_under_the_bound_the_history_is_encoded_once_and_the_commit_reuses_it(monkeypatch):
    messages = _history_of([(["quero saber do pedido 4821"], True, "Vou conferir."), (["e o 9999?"], False, "ok")])
    encoded: list[Any] = []
    real = history.compact_json
    monkeypatch.setattr(history, "compact_json", lambda value: encoded.append(value) or real(value))
    stored = history.for_storage(messages)
    assert stored.messages == messages and encoded == [messages]  # the list once, in one call
    blob = compressed_json(stored.messages, encoded=stored.encoded)
    assert blob == zlib.compress(stored.encoded) and from_compressed_json(blob, []) == messages
    assert EncodedHistory.of(messages) == stored


def test_a_cut_re_encodes_only_the_messages_it_changed(monkeypatch):
    messages = _history_of([([f"pergunta {n} " + "x" * 400], n % 2 == 0, f"resposta {n}") for n in range(8)])
    encoded: list[Any] = []
    real = history.compact_json
    monkeypatch.setattr(history, "compact_json", lambda value: encoded.append(value) or real(value))
    stored = history.for_storage(messages, 1_500)
    assert stored.messages == _bounded_before(messages, 1_500)
    assert len(stored.messages) < len(messages)
    # the list once (over the bound), then every message once and one first message per
    # cut (trim rewrites it): the list is never encoded again
    assert encoded[0] == messages and len(encoded) <= 1 + len(messages) + (len(messages) - len(stored.messages))
    assert all(isinstance(value, dict) for value in encoded[1:])

"""The conversation's message list, kept valid for the Messages API.

Invariants kept here: every ``tool_use`` is followed by its ``tool_result``;
the history starts with a plain user message; consecutive user content is
merged into one message (a reply that failed after tools ran leaves a user
``tool_result`` message last, and the next customer text joins it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cadencia_shared.ledger import EncodedHistory
from cadencia_shared.ledger.table import compact_json

Message = dict[str, Any]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _append_text(messages: list[Message], role: str, text: str) -> list[Message]:
    """``text`` as ``role``'s turn, joined to a last message of the same role so roles alternate."""
    out = list(messages)
    block = {"type": "text", "text": text}
    if out and out[-1]["role"] == role:
        out[-1] = {"role": role, "content": [*_blocks(out[-1]["content"]), block]}
    else:
        out.append({"role": role, "content": [block]})
    return out


def extend(messages: list[Message], new: Iterable[Message]) -> list[Message]:
    """``new`` appended, each joined to a last message of the same role."""
    out = list(messages)
    for message in new:
        if out and out[-1]["role"] == message["role"]:
            out[-1] = {"role": message["role"], "content": [*_blocks(out[-1]["content"]), *_blocks(message["content"])]}
        else:
            out.append(message)
    return out


def append_user_text(messages: list[Message], text: str) -> list[Message]:
    return _append_text(messages, "user", text)


def _starts_cleanly(message: Message) -> bool:
    return message["role"] == "user" and all(b.get("type") != "tool_result" for b in _blocks(message["content"]))


def _has_customer_text(message: Message) -> bool:
    return message["role"] == "user" and any(b.get("type") == "text" for b in _blocks(message["content"]))


def trim(messages: list[Message], max_messages: int) -> list[Message]:
    """Drop the oldest turns so that at most ``max_messages`` remain, cutting only
    where a customer message begins (never between a tool_use and its result).

    Never returns an empty list and never drops the current turn: when even the
    last customer message and what follows it exceed the limit, that turn is kept
    whole. A customer message merged after tool_results (a failed reply) loses
    those results, since their tool_use is cut away with the older turn.
    """
    out = list(messages)
    if len(out) <= max_messages and (not out or _starts_cleanly(out[0])):
        return out
    starts = [i for i, m in enumerate(out) if _has_customer_text(m)]
    if not starts:
        return out
    fitting = [i for i in starts if len(out) - i <= max_messages]
    first = fitting[0] if fitting else starts[-1]
    out = out[first:]
    out[0] = {"role": "user", "content": [b for b in _blocks(out[0]["content"]) if b.get("type") != "tool_result"]}
    return out


def trim_in_steps(messages: list[Message], max_messages: int, after_cut: int) -> list[Message]:
    """``trim`` with hysteresis: nothing is cut until the history passes ``max_messages``;
    then the oldest turns go down to ``after_cut`` at once. Cutting one turn on every
    turn past the cap changes the conversation's first bytes on every request, so the
    cached prefix is never read again; a cut every (max - after) messages lets it be
    read between cuts."""
    if len(messages) <= max_messages and (not messages or _starts_cleanly(messages[0])):
        return list(messages)
    return trim(messages, after_cut)


# The stored history's bound, as UTF-8 JSON (zlib never makes it bigger than this plus a
# few bytes): the conversation item is capped at 400 KB by DynamoDB, and the rest of it
# (the inbound maps, the anchor, the status) needs room. The count trim alone does not
# bound it: while a conversation waits, every customer text joins ONE user message
# (tests/test_redteam_history_growth.py).
STORED_HISTORY_MAX_BYTES = 200_000


def _size(value: Any) -> int:
    return len(compact_json(value))


def bounded(messages: list[Message], max_bytes: int = STORED_HISTORY_MAX_BYTES, *,
            cut_turns: bool = True) -> list[Message]:
    """The history as stored: within ``max_bytes``, dropping the oldest turns first
    (cut where a customer message begins, as ``trim``), then the oldest text blocks of
    merged messages (the newest block of each message is kept, and no tool block is
    touched, so every tool_use keeps its result). ``cut_turns=False``: blocks only, so
    the number of messages stays (a person's reply id counts them: orchestrator.human_reply)."""
    return for_storage(messages, max_bytes, cut_turns=cut_turns).messages


def for_storage(messages: list[Message], max_bytes: int = STORED_HISTORY_MAX_BYTES, *,
                cut_turns: bool = True) -> EncodedHistory:
    """``bounded``'s history with its stored JSON, which the commit compresses as is: a
    history under the bound (the common case) is encoded once per commit, in one call."""
    encoded = compact_json(messages)
    if len(encoded) <= max_bytes:
        return EncodedHistory(list(messages), encoded)
    return _cut(messages, len(encoded), max_bytes, cut_turns)


def _cut(messages: list[Message], size: int, max_bytes: int, cut_turns: bool) -> EncodedHistory:
    """Over the bound: each message encoded once, the list's ``size`` kept from theirs
    (``[``, ``]`` and a comma between two), and a message re-encoded only when a cut
    rewrites it — not the whole list on every pass."""
    out = list(messages)
    parts = [compact_json(message) for message in out]
    while cut_turns and size > max_bytes and len(out) > 1:
        shorter = trim(out, len(out) - 1)
        if len(shorter) == len(out):
            break  # one turn left: it cannot be cut at a customer message
        # ``trim`` keeps a suffix, rewriting its first message (a merged customer
        # message loses the results of the cut turn's calls).
        dropped, first = len(out) - len(shorter), compact_json(shorter[0])
        size += len(first) - sum(map(len, parts[:dropped + 1])) - dropped  # and their commas
        out, parts = shorter, [first, *parts[dropped + 1:]]
    for index, message in enumerate(out):
        if size <= max_bytes:
            break
        blocks = _blocks(message["content"])
        while size > max_bytes and len(blocks) > 1:
            oldest_text = next((i for i, b in enumerate(blocks[:-1]) if b.get("type") == "text"), None)
            if oldest_text is None:
                break
            size -= _size(blocks[oldest_text]) + 1  # and its comma
            blocks = blocks[:oldest_text] + blocks[oldest_text + 1:]
        if len(blocks) != len(_blocks(message["content"])):
            out[index] = {**message, "content": blocks}
            parts[index] = compact_json(out[index])
    return EncodedHistory(out, b"[" + b",".join(parts) + b"]")


def append_assistant_text(messages: list[Message], text: str) -> list[Message]:
    """A person's reply, written as the agent's turn (the model reads it later)."""
    return _append_text(messages, "assistant", text)


def text_of(content: list[dict[str, Any]]) -> str:
    return "\n".join(b["text"] for b in content if b.get("type") == "text" and b.get("text")).strip()


def tool_result(tool_use_id: str, body: str, *, is_error: bool) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": body, "is_error": is_error}


def tool_use_ids(messages: list[Message]) -> set[str]:
    """Every ``tool_use`` id the model has already sent in this conversation."""
    return {b["id"] for m in messages if m["role"] == "assistant"
            for b in _blocks(m["content"]) if b.get("type") == "tool_use"}


def not_executed(content: list[dict[str, Any]], body: str) -> list[dict[str, Any]]:
    """One ``is_error`` result per ``tool_use`` block of ``content``: the answer to
    calls the code decided not to run, so the history stays valid (every
    tool_use followed by exactly one tool_result) for the next request."""
    return [tool_result(b["id"], body, is_error=True) for b in content if b.get("type") == "tool_use"]

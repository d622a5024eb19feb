"""The conversation's message list, kept valid for the Messages API.

Invariants kept here: every ``tool_use`` is followed by its ``tool_result``;
the history starts with a plain user message; consecutive user content is
merged into one message (a reply that failed after tools ran leaves a user
``tool_result`` message last, and the next customer text joins it).
"""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def append_user_text(messages: list[Message], text: str) -> list[Message]:
    out = list(messages)
    block = {"type": "text", "text": text}
    if out and out[-1]["role"] == "user":
        out[-1] = {"role": "user", "content": [*_blocks(out[-1]["content"]), block]}
    else:
        out.append({"role": "user", "content": [block]})
    return out


def _starts_cleanly(message: Message) -> bool:
    return message["role"] == "user" and all(b.get("type") != "tool_result" for b in _blocks(message["content"]))


def trim(messages: list[Message], max_messages: int) -> list[Message]:
    """Drop the oldest messages until at most ``max_messages`` remain and the
    first one is a plain user message (never an orphaned tool_result)."""
    out = list(messages)
    while out and (len(out) > max_messages or not _starts_cleanly(out[0])):
        out.pop(0)
    return out


def text_of(content: list[dict[str, Any]]) -> str:
    return "\n".join(b["text"] for b in content if b.get("type") == "text" and b.get("text")).strip()


def tool_result(tool_use_id: str, body: str, *, is_error: bool) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": body, "is_error": is_error}

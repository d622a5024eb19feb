"""Where the model's requests carry ``cache_control`` (Anthropic prompt caching).

Two breakpoints, of the four a request may carry:

1. the system prompt: it follows the tools in the cache's order (tools, system,
   messages), so this one prefix covers every tool schema and the instructions. It is
   byte-identical in every request of every conversation: the tools come from one
   registry in its declared order, and the system prompt is a constant with no
   customer, conversation or time in it (who the customer is never reaches the model:
   the code passes ``clienteId`` to the tools in the signed envelope). One conversation
   writes it, every other one reads it.
2. the last block of the conversation: each request is the previous one plus a few
   blocks, so the API's look-back (about 20 blocks before a breakpoint) finds the
   previous request's prefix and only the new blocks are written. The next customer
   message reads the whole stored conversation, as long as it comes within the TTL.

The history as stored never carries ``cache_control`` (the marks are put on copies
here): a stored block with a mark would move the breakpoint into old turns and count
against the four.

TTL: "5m" (the API's default, written as no ``ttl``: every provider accepts it, Bedrock
included) or "1h" (2× write price; on Bedrock only for the models AWS lists for it).
A 1-hour breakpoint must come before any 5-minute one, so the prefix's TTL is never
shorter than the conversation's. docs/model-cost.md has the measurement behind the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Ttl = Literal["5m", "1h", "off"]


def _control(ttl: Ttl) -> dict[str, str]:
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


@dataclass(frozen=True)
class CacheLayout:
    prefix_ttl: Ttl = "5m"
    conversation_ttl: Ttl = "5m"

    def __post_init__(self) -> None:
        if self.prefix_ttl == "5m" and self.conversation_ttl == "1h":
            raise ValueError("a 1h breakpoint cannot follow a 5m one: set the prefix's TTL to 1h too")

    def system(self, text: str) -> str | list[dict[str, Any]]:
        if self.prefix_ttl == "off":
            return text
        return [{"type": "text", "text": text, "cache_control": _control(self.prefix_ttl)}]

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with a breakpoint on the last block (a copy: nothing stored is marked)."""
        if self.conversation_ttl == "off" or not messages:
            return messages
        last = messages[-1]
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if not blocks:
            return messages
        blocks[-1] = {**blocks[-1], "cache_control": _control(self.conversation_ttl)}
        return [*messages[:-1], {**last, "content": blocks}]


NO_CACHE = CacheLayout("off", "off")

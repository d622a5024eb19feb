"""The Messages API's token accounting, for the scripted models (tests, harness, benchmark).

What Anthropic documents for prompt caching, reproduced so the figures of a
conversation can be measured without the real model:

- The prompt is read in the cache's order: ``tools``, then ``system``, then
  ``messages``; each tool, each system block and each message content block is one
  *block*. A block carrying ``cache_control`` is a breakpoint: at most 4 per request
  (a 5th is a 400 ``invalid_request_error``, as the API answers), ``ttl`` "5m"
  (default) or "1h", and a 1-hour breakpoint may not follow a 5-minute one.
- A breakpoint whose prefix (everything up to and including its block) is shorter
  than the model's minimum cacheable length caches nothing.
- A read: the longest prefix ending at a block boundary that is live in the cache,
  looked up at each breakpoint and at most ``LOOKBACK`` blocks before it. A hit
  refreshes that entry's TTL. A changed byte anywhere before a breakpoint is another
  prefix: a miss. The model id is part of every prefix; ``tool_choice`` is part of
  the messages' (changing it keeps tools and system cached, as documented).
- A write: from the end of the read to the last cacheable breakpoint, billed as
  ``cache_creation_input_tokens`` (split by TTL in ``cache_creation``).
- ``input_tokens`` is what follows: neither read nor written.
- The cache is shared by every request to the same model (an organization's cache,
  not a conversation's): the tools + system prefix of one conversation is read by the next.

Tokenizer proxy (stated, not Claude's): a block's tokens are its compact JSON
(``cache_control`` removed) in UTF-8 bytes, divided by 4, rounded up; a request with
tools adds ``TOOL_PROMPT_TOKENS`` for the tool-use system prompt the API inserts.
Ratios between layouts are the figure; absolute counts are an estimate.
Time comes from an injected clock (seconds), never the wall clock, in tests.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_BREAKPOINTS = 4
LOOKBACK = 20  # blocks checked before each breakpoint for an earlier cached prefix
TOOL_PROMPT_TOKENS = 313  # the tool-use system prompt (tool_choice "any"/"tool"), Sonnet-class models
TTL_S = {"5m": 300.0, "1h": 3600.0}
# Minimum cacheable prompt length, by model id prefix (Anthropic's prompt caching page, read 2026-12).
MINIMUM_BY_MODEL = (
    ("claude-opus-4-5", 4096), ("claude-opus-4-6", 4096), ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048), ("claude-haiku-3", 2048), ("claude-3-5-haiku", 2048), ("claude-3-haiku", 2048),
    ("claude-sonnet-4-5", 1024), ("claude-sonnet-4", 1024), ("claude-opus-4", 1024),
)
DEFAULT_MINIMUM = 1024


def minimum_for(model: str) -> int:
    name = model.split(".")[-1] if model.count(".") else model  # a Bedrock id: "us.anthropic.claude-…"
    for prefix, tokens in MINIMUM_BY_MODEL:
        if name.startswith(prefix):
            return tokens
    return DEFAULT_MINIMUM


def tokens_of(value: Any) -> int:
    """The tokenizer proxy: compact-JSON UTF-8 bytes ÷ 4, rounded up."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False).encode()
    return math.ceil(len(raw) / 4)


class CacheRequestError(ValueError):
    """What the API answers 400 ``invalid_request_error`` for."""


@dataclass(frozen=True)
class Block:
    key: bytes  # the block's bytes as they count for the prefix (cache_control removed)
    tokens: int
    ttl: str | None  # None: not a breakpoint


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    cache_creation_5m: int = 0
    cache_creation_1h: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_creation_input_tokens": self.cache_creation_input_tokens,
                "cache_read_input_tokens": self.cache_read_input_tokens,
                "cache_creation": {"ephemeral_5m_input_tokens": self.cache_creation_5m,
                                   "ephemeral_1h_input_tokens": self.cache_creation_1h}}


def _without_cache_control(block: Any) -> tuple[Any, str | None]:
    if not isinstance(block, dict) or "cache_control" not in block:
        return block, None
    control = block["cache_control"]
    if not isinstance(control, dict) or control.get("type") != "ephemeral":
        raise CacheRequestError("cache_control.type: Input should be 'ephemeral'")
    ttl = control.get("ttl", "5m")
    if ttl not in TTL_S:
        raise CacheRequestError(f"cache_control.ttl: Input should be '5m' or '1h' (got {ttl!r})")
    return {k: v for k, v in block.items() if k != "cache_control"}, ttl


def blocks_of(request: dict[str, Any]) -> list[Block]:
    """The request's blocks in the cache's order, each with its tokens and breakpoint."""
    out: list[Block] = []

    def add(section: str, block: Any, extra: Any = None) -> None:
        clean, ttl = _without_cache_control(block)
        key = json.dumps([section, extra, clean], ensure_ascii=False, separators=(",", ":")).encode()
        out.append(Block(key, tokens_of(clean), ttl))

    for tool in request.get("tools") or []:
        add("tools", tool)
    system = request.get("system")
    if isinstance(system, str) and system:
        add("system", {"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add("system", block)
    choice = request.get("tool_choice")
    for index, message in enumerate(request.get("messages") or []):
        content = message.get("content")
        content = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for position, block in enumerate(content):
            # Each block carries its message's place and role (a merged message is another
            # prompt); tool_choice belongs to the messages' prefix.
            add("messages", block, [choice, index, message.get("role"), position])
    return out


class PromptCache:
    """One organization's prompt cache for a model, and the ``usage`` of each request."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, minimum: int | None = None) -> None:
        self.clock = clock
        self.minimum = minimum  # None: by the request's model (``minimum_for``)
        self._expiry: dict[bytes, float] = {}
        self._ttl: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def account(self, request: dict[str, Any], output: Any) -> Usage:
        """``usage`` for ``request`` answered with content ``output``; updates the cache.
        Raises ``CacheRequestError`` where the API answers 400."""
        blocks = blocks_of(request)
        marks = [i for i, b in enumerate(blocks) if b.ttl is not None]
        if len(marks) > MAX_BREAKPOINTS:
            raise CacheRequestError(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                                    f"Found {len(marks)}.")
        ttls = [blocks[i].ttl for i in marks]
        if any(a == "5m" and b == "1h" for a, b in zip(ttls, ttls[1:], strict=False)):
            raise CacheRequestError("a ttl='1h' cache_control block must not come after a ttl='5m' block")
        model = str(request.get("model", ""))
        minimum = self.minimum if self.minimum is not None else minimum_for(model)
        overhead = TOOL_PROMPT_TOKENS if request.get("tools") else 0
        prefix_keys, prefix_tokens = self._prefixes(model, blocks, overhead)
        total = prefix_tokens[-1] if blocks else overhead
        with self._lock:
            now = self.clock()
            read_end = self._longest_hit(marks, prefix_keys, now)
            read = prefix_tokens[read_end] if read_end is not None else 0
            if read_end is not None:
                self._expiry[prefix_keys[read_end]] = now + self._ttl[prefix_keys[read_end]]
            written = {"5m": 0, "1h": 0}
            covered = read
            for i in marks:
                if prefix_tokens[i] < minimum or (read_end is not None and i <= read_end):
                    continue
                ttl = blocks[i].ttl or "5m"
                written[ttl] += prefix_tokens[i] - covered
                covered = prefix_tokens[i]
                self._expiry[prefix_keys[i]], self._ttl[prefix_keys[i]] = now + TTL_S[ttl], TTL_S[ttl]
        creation = written["5m"] + written["1h"]
        return Usage(input_tokens=total - read - creation, cache_creation_input_tokens=creation,
                     cache_read_input_tokens=read, output_tokens=tokens_of(output),
                     cache_creation_5m=written["5m"], cache_creation_1h=written["1h"])

    @staticmethod
    def _prefixes(model: str, blocks: list[Block], overhead: int) -> tuple[list[bytes], list[int]]:
        digest = hashlib.sha256(model.encode())
        keys, tokens, running = [], [], overhead
        for block in blocks:
            digest.update(len(block.key).to_bytes(8, "big") + block.key)
            running += block.tokens
            keys.append(digest.copy().digest())
            tokens.append(running)
        return keys, tokens

    def _longest_hit(self, marks: list[int], keys: list[bytes], now: float) -> int | None:
        best = None
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK), -1):
                expiry = self._expiry.get(keys[i])
                if expiry is not None and expiry > now:
                    best = i if best is None else max(best, i)
                    break
        return best


def billed_input(usage: Usage | dict[str, Any]) -> float:
    """Input-token equivalents at the input price: a read 0.1×, a 5-minute write 1.25×,
    a 1-hour write 2× (Anthropic's and Bedrock's multipliers)."""
    u = usage.as_json() if isinstance(usage, Usage) else usage
    creation = u.get("cache_creation") or {}
    one_hour = creation.get("ephemeral_1h_input_tokens", 0) or 0
    five_min = (u.get("cache_creation_input_tokens", 0) or 0) - one_hour
    return (u.get("input_tokens", 0) + 0.1 * (u.get("cache_read_input_tokens", 0) or 0)
            + 1.25 * five_min + 2.0 * one_hour)

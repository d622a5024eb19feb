"""The scripted model's token accounting against hand counts (scripts/harness/prompt_cache.py).

Tokenizer proxy: a block's compact JSON bytes ÷ 4, rounded up; +313 when tools are sent.
A system text of n characters is the block ``{"type":"text","text":"…"}``: 25 + n bytes.
"""

from __future__ import annotations

import anthropic
import pytest

from scripts.harness.prompt_cache import PromptCache, billed_input, blocks_of
from tests.support.anthropic_fake import ScriptedModel, text_reply


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def system(chars: int, ttl: str | None = "5m", fill: str = "s") -> list[dict]:
    block = {"type": "text", "text": fill * chars}
    if ttl is not None:
        block["cache_control"] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    return [block]


def user(text: str, ttl: str | None = None) -> dict:
    block = {"type": "text", "text": text}
    if ttl:
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return {"role": "user", "content": [block]}


OUT = [{"type": "text", "text": "ok"}]  # the content list: 29 bytes, 8 output tokens


def request(sys_blocks, messages, **extra):
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": sys_blocks, "messages": messages, **extra}


def test_without_breakpoints_everything_is_input_by_the_stated_proxy():
    cache = PromptCache(clock=Clock())
    usage = cache.account(request(system(4075, ttl=None), [user("oi")]), OUT)
    # system: 25 + 4075 = 4100 bytes -> 1025; "oi": 27 bytes -> 7 (ceil 6.75)
    assert (usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens,
            usage.output_tokens) == (1032, 0, 0, 8)


def test_a_breakpoint_over_the_minimum_is_written_then_read():
    clock = Clock()
    cache = PromptCache(clock=clock)
    req = request(system(4075), [user("oi")])
    first = cache.account(req, OUT)
    assert (first.input_tokens, first.cache_creation_input_tokens, first.cache_read_input_tokens) == (7, 1025, 0)
    assert first.cache_creation_5m == 1025 and first.cache_creation_1h == 0
    clock.now += 299
    second = cache.account(req, OUT)
    assert (second.input_tokens, second.cache_creation_input_tokens, second.cache_read_input_tokens) == (7, 0, 1025)
    assert billed_input(second) == pytest.approx(7 + 102.5)
    assert billed_input(first) == pytest.approx(7 + 1.25 * 1025)


def test_a_prefix_under_the_models_minimum_caches_nothing():
    cache = PromptCache(clock=Clock())
    req = request(system(4067), [user("oi")])  # 4092 bytes: 1023 tokens < 1024
    for _ in range(2):
        usage = cache.account(req, OUT)
        assert (usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (1030, 0, 0)
    # The same prefix with a model whose minimum is 1,024 caches one token longer:
    assert PromptCache(clock=Clock(), minimum=1023).account(req, OUT).cache_creation_input_tokens == 1023


def test_the_minimum_follows_the_configured_model():
    req = request(system(8000), [user("oi")])  # 2007 tokens: over 1,024, under 2,048
    assert PromptCache(clock=Clock()).account(req, OUT).cache_creation_input_tokens == 2007
    assert PromptCache(clock=Clock()).account({**req, "model": "claude-haiku-3-5"}, OUT).cache_creation_input_tokens == 0
    assert PromptCache(clock=Clock()).account({**req, "model": "us.anthropic.claude-haiku-4-5-v1:0"},
                                              OUT).cache_creation_input_tokens == 0


def test_a_changed_byte_before_the_breakpoint_is_a_miss():
    cache = PromptCache(clock=Clock())
    cache.account(request(system(4075), [user("oi")]), OUT)
    changed = cache.account(request(system(4074) + [], [user("oi")]) | {"system": [
        {"type": "text", "text": "s" * 4074 + "t", "cache_control": {"type": "ephemeral"}}]}, OUT)
    assert (changed.cache_read_input_tokens, changed.cache_creation_input_tokens) == (0, 1025)
    # ... and another model is another cache
    other = cache.account(request(system(4075), [user("oi")]) | {"model": "claude-sonnet-4"}, OUT)
    assert other.cache_read_input_tokens == 0


def test_five_minutes_expire_and_a_hit_refreshes_them():
    clock = Clock()
    cache = PromptCache(clock=clock)
    req = request(system(4075), [user("oi")])
    cache.account(req, OUT)
    clock.now += 290
    assert cache.account(req, OUT).cache_read_input_tokens == 1025  # refreshed at 290 s
    clock.now += 290  # 580 s after the write, 290 after the hit
    assert cache.account(req, OUT).cache_read_input_tokens == 1025
    clock.now += 301
    expired = cache.account(req, OUT)
    assert (expired.cache_read_input_tokens, expired.cache_creation_input_tokens) == (0, 1025)


def test_one_hour_lives_an_hour_and_bills_twice_the_input():
    clock = Clock()
    cache = PromptCache(clock=clock)
    req = request(system(4075, ttl="1h"), [user("oi")])
    first = cache.account(req, OUT)
    assert (first.cache_creation_1h, first.cache_creation_5m) == (1025, 0)
    assert billed_input(first) == pytest.approx(7 + 2 * 1025)
    clock.now += 3599
    assert cache.account(req, OUT).cache_read_input_tokens == 1025
    clock.now += 3601
    assert cache.account(req, OUT).cache_read_input_tokens == 0


def test_a_later_breakpoint_reads_the_earlier_prefix_and_writes_only_the_rest():
    clock = Clock()
    cache = PromptCache(clock=clock)
    history = [user("a" * 2000), {"role": "assistant", "content": [{"type": "text", "text": "b" * 2000}]}]
    first = cache.account(request(system(4075), [*history, user("c" * 95, ttl="5m")]), OUT)
    # system 1025; 2025 bytes -> 507 each; "c"*95: 120 bytes -> 30
    assert (first.cache_creation_input_tokens, first.input_tokens) == (1025 + 507 + 507 + 30, 0)
    nxt = [*history, user("c" * 95), {"role": "assistant", "content": [{"type": "text", "text": "d" * 95}]},
           user("e" * 95, ttl="5m")]
    second = cache.account(request(system(4075), nxt), OUT)
    # read: up to the old last block (found by the look-back); written: the two new blocks
    assert (second.cache_read_input_tokens, second.cache_creation_input_tokens, second.input_tokens) == \
        (1025 + 507 + 507 + 30, 60, 0)


def test_tool_choice_belongs_to_the_messages_prefix_not_to_tools_and_system():
    cache = PromptCache(clock=Clock())
    msgs = [user("x" * 95, ttl="5m")]
    cache.account(request(system(4075), msgs, tool_choice={"type": "auto"}), OUT)
    again = cache.account(request(system(4075), msgs, tool_choice={"type": "any"}), OUT)
    assert (again.cache_read_input_tokens, again.cache_creation_input_tokens) == (1025, 30)


def test_tools_count_the_tool_prompt_and_come_first():
    tool = {"name": "t", "description": "d" * 100, "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral"}}
    blocks = blocks_of({"tools": [tool], "system": "s", "messages": []})
    assert [b.ttl for b in blocks] == ["5m", None]
    usage = PromptCache(clock=Clock(), minimum=1).account(
        {"model": "m", "tools": [tool], "system": "s", "messages": [user("oi")]}, OUT)
    tool_tokens = -(-len('{"name":"t","description":"' + "d" * 100 + '","input_schema":{"type":"object"}}') // 4)
    assert usage.cache_creation_input_tokens == 313 + tool_tokens


def _sdk_call(model: ScriptedModel, **kwargs):
    return model.sdk().messages.create(model="claude-sonnet-5-5", max_tokens=64, **kwargs)


def test_the_real_sdk_reads_the_fields_and_a_fifth_breakpoint_is_the_apis_400():
    clock = Clock()
    model = ScriptedModel(default=text_reply("ok"), cache=PromptCache(clock=clock))
    msgs = [user("oi")]
    first = _sdk_call(model, system=system(4075), messages=msgs)
    second = _sdk_call(model, system=system(4075), messages=msgs)
    assert first.usage.cache_creation_input_tokens == 1025 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == 1025 and second.usage.input_tokens == 7
    assert second.usage.cache_creation.ephemeral_5m_input_tokens == 0
    five = [user(str(i), ttl="5m") | {"role": "user" if i % 2 == 0 else "assistant"} for i in range(4)]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
        _sdk_call(model, system=system(4075), messages=[*five, user("z")])
    with pytest.raises(anthropic.BadRequestError, match="must not come after"):
        _sdk_call(model, system=system(4075), messages=[user("z", ttl="1h")])


from hypothesis import given, settings as hsettings, strategies as st  # noqa: E402

_blocks = st.lists(st.tuples(st.text(min_size=1, max_size=300), st.sampled_from([None, "5m", "1h"])), min_size=1,
                   max_size=8)


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_blocks, st.floats(min_value=0, max_value=4000)), min_size=1, max_size=6),
       st.sampled_from([1, 64, 1024]))
def test_every_token_is_billed_once_as_input_read_or_write(requests, minimum):
    clock = Clock()
    cache = PromptCache(clock=clock, minimum=minimum)
    for blocks, wait in requests:
        clock.now += wait
        content = []
        for text, ttl in blocks:
            block = {"type": "text", "text": text}
            if ttl:
                block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
            content.append(block)
        req = {"model": "m", "messages": [{"role": "user", "content": content}]}
        marks = [ttl for _, ttl in blocks if ttl]
        ordered = all(not (a == "5m" and b == "1h") for a, b in zip(marks, marks[1:]))
        if len(marks) > 4 or not ordered:
            with pytest.raises(ValueError):
                cache.account(req, OUT)
            continue
        usage = cache.account(req, OUT)
        total = sum(b.tokens for b in blocks_of(req))
        assert usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens == total
        assert min(usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) >= 0
        assert usage.cache_creation_5m + usage.cache_creation_1h == usage.cache_creation_input_tokens
        if not marks:
            assert usage.input_tokens == total

"""Prompt caching pays: billed input-token equivalents per customer message, cached ÷
uncached, measured through the real orchestrator and SDK against the scripted model's
Messages-API accounting (scripts/perf/model_cost.py). Messages 1–3 minutes apart on an
injected clock; no wall time, nothing timed."""

from __future__ import annotations

import json

import pytest

from orchestrator import history
from orchestrator.prompt_cache import CacheLayout
from scripts.perf import model_cost


def _before_first_breakpoint(request: dict) -> bytes:
    return json.dumps([request["tools"], request["system"]], sort_keys=True).encode()


@pytest.mark.parametrize(("scenario", "minimum", "target"), [
    ("status10", 1024, 0.25), ("prova", 1024, 0.30), ("status10", 2048, 0.65), ("long44", 1024, 0.30)])
def test_caching_bills_at_most_the_target_share_of_the_uncached_input(mocked_aws, scenario, minimum, target):
    scenarios = {"status10": [model_cost.status_conversation("custo-s10", 10)],
                 "prova": model_cost.prova_conversations(),
                 "long44": [model_cost.status_conversation("custo-l44", 44)]}[scenario]
    ratio, cached, uncached = model_cost.ratio(mocked_aws["ledger"], scenarios, minimum)
    assert cached.calls == uncached.calls and cached.messages == uncached.messages  # the same conversation
    assert cached.input_tokens == uncached.input_tokens  # the model read the same; only the bill differs
    assert uncached.cache_read == uncached.cache_write == 0
    assert cached.cache_read > 0
    assert ratio <= target, (scenario, minimum, ratio)


def test_a_4096_minimum_caches_nothing_in_a_short_status_chat(mocked_aws):
    """The figure the docs report: every request of a 10-message chat is under 4,096 tokens."""
    ratio, cached, _ = model_cost.ratio(mocked_aws["ledger"], [model_cost.status_conversation("custo-4k", 10)], 4096)
    assert cached.cache_write == cached.cache_read == 0 and ratio == pytest.approx(1.0)


def test_the_bytes_before_each_breakpoint_repeat_across_turns_and_conversations(mocked_aws):
    scenarios = [model_cost.status_conversation("custo-a", 6), model_cost.status_conversation("custo-b", 6, 8802)]
    requests: list[dict] = []
    conversations: list[str] = []
    original = model_cost.AccountingModel.handler

    def recording(self, request):
        requests.append(json.loads(request.content))
        conversations.append(self.policy.scenario.conversaId)
        return original(self, request)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model_cost.AccountingModel, "handler", recording)
        model_cost.run(mocked_aws["ledger"], scenarios, cached=True, minimum=1024)
    assert len(requests) == 18
    assert len({_before_first_breakpoint(r) for r in requests}) == 1  # tools + system: one prefix
    for request in requests:
        marks = [b for m in request["messages"] for b in m["content"] if "cache_control" in b]
        assert len(marks) == 1 and request["messages"][-1]["content"][-1] is marks[0]
        assert "cache_control" in request["system"][-1]
    # Within a conversation each request starts with the previous one (its breakpoint's
    # bytes unchanged), the mark aside.
    by_conversation: dict[str, list[dict]] = {}
    for conversation, request in zip(conversations, requests, strict=True):
        by_conversation.setdefault(conversation, []).append(request)
    assert len(by_conversation) == 2
    for chain in by_conversation.values():
        for before, after in zip(chain, chain[1:], strict=False):
            prior = CacheLayout("off", "off").messages(_unmarked(before["messages"]))
            assert _unmarked(after["messages"])[:len(prior) - 1] == prior[:-1]
            last = len(prior) - 1
            assert _unmarked(after["messages"])[last]["content"][:len(prior[last]["content"])] == \
                prior[last]["content"]


def _unmarked(messages: list[dict]) -> list[dict]:
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
            for m in messages]


def test_the_history_is_cut_in_steps_so_the_prefix_survives_between_cuts():
    turn = [{"role": "user", "content": [{"type": "text", "text": "oi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "olá"}]}]
    messages: list[dict] = []
    cuts = 0
    for _ in range(100):
        grown = [*messages, *turn]
        kept = history.trim_in_steps(grown, 80, 40)
        cuts += kept[0] is not grown[0]
        assert len(kept) <= 80 and kept[0]["role"] == "user"
        messages = kept
    # 200 messages through a cap of 80 cut to 40: at turns 41, 62 and 83 (82 messages each
    # time), not on each of the 60 turns past the cap
    assert cuts == 3
    assert history.trim_in_steps(turn * 40, 80, 40) == turn * 40  # at the cap: nothing cut

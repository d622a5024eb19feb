"""What the orchestrator sends for prompt caching (orchestrator.prompt_cache), on the
Anthropic API and on Bedrock, and what it never stores."""

from __future__ import annotations

import json

import httpx2
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from pydantic import ValidationError

from orchestrator import texts
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline, build_sdk, model_client
from orchestrator.settings import OrchestratorSettings
from scripts.harness.prompt_cache import PromptCache
from tests.support.anthropic_fake import ScriptedModel, fixture, text_reply, tool_use
from tests.support.orchestrators import CountingInvoker, build, settings


def _turn(conv: str, n: int, text: str = "Qual o status do pedido 4821?") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"{conv}.{n}", mensagem=text)


CACHED = {"PROMPT_CACHE_PREFIX_TTL": "5m", "PROMPT_CACHE_TTL": "5m"}


def test_two_breakpoints_system_and_last_block_and_nothing_marked_is_stored(mocked_aws):
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Consultei aqui."),
                          text_reply("De nada!"), cache=PromptCache(clock=lambda: 0.0))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), **CACHED)
    orch.handle(_turn("pc-1", 1), Deadline.after(60))
    orch.handle(_turn("pc-1", 2, "Obrigado"), Deadline.after(60))
    assert len(model.requests) == 3
    for request in model.requests:
        assert request["system"] == [{"type": "text", "text": texts.SYSTEM_PROMPT,
                                      "cache_control": {"type": "ephemeral"}}]
        marked = [b for m in request["messages"] for b in m["content"] if "cache_control" in b]
        assert marked == [request["messages"][-1]["content"][-1]]
        assert not any("cache_control" in t for t in request["tools"])
    # The second and third requests read what the first wrote (the fake's accounting).
    assert model.usages[0]["cache_read_input_tokens"] == 0 and model.usages[0]["cache_creation_input_tokens"] > 0
    assert all(u["cache_read_input_tokens"] > 0 for u in model.usages[1:])
    stored = mocked_aws["ledger"].read_conversation("pc-1")
    assert "cache_control" not in json.dumps(stored.messages)


def test_one_hour_is_sent_as_the_api_spells_it_and_a_1h_after_5m_is_refused_by_the_settings(mocked_aws):
    model = ScriptedModel(text_reply("Olá!"), cache=PromptCache(clock=lambda: 0.0))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), PROMPT_CACHE_PREFIX_TTL="1h",
                    PROMPT_CACHE_TTL="5m")
    orch.handle(_turn("pc-2", 1), Deadline.after(60))
    assert model.requests[0]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert model.requests[0]["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    with pytest.raises(ValidationError, match="PROMPT_CACHE_PREFIX_TTL=1h"):
        settings(PROMPT_CACHE_PREFIX_TTL="5m", PROMPT_CACHE_TTL="1h")
    with pytest.raises(ValidationError):
        settings(PROMPT_CACHE_TTL="10m")


def test_the_bedrock_client_sends_the_same_marks_in_the_invoke_model_body(mocked_aws):
    bodies: list[dict] = []

    def bedrock(request: httpx2.Request) -> httpx2.Response:
        assert "/model/" in request.url.path and request.url.path.endswith("/invoke")
        assert request.headers.get("authorization", "").startswith("AWS4-HMAC-SHA256")
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=fixture("end_turn"))

    cfg = OrchestratorSettings.from_env({"MODEL_PROVIDER": "bedrock", "AWS_REGION": "us-east-1",
                                         "MODEL_ID": "us.anthropic.claude-sonnet-4-5-20250929-v1:0"})
    client = model_client(cfg, build_sdk(cfg, http_client=httpx2.Client(transport=httpx2.MockTransport(bedrock))))
    client.create(system=texts.SYSTEM_PROMPT, tools=[], deadline=Deadline.after(60),
                  messages=[{"role": "user", "content": [{"type": "text", "text": "oi"}]}])
    (body,) = bodies
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}  # 5m: no ttl, every Bedrock model takes it
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_the_prefix_lives_an_hour_on_the_anthropic_api_and_five_minutes_on_bedrock_by_default():
    anthropic_cfg = OrchestratorSettings.from_env({"MODEL_PROVIDER": "anthropic", "AWS_REGION": "us-east-1"})
    bedrock_cfg = OrchestratorSettings.from_env({"MODEL_PROVIDER": "bedrock", "AWS_REGION": "us-east-1"})
    assert (anthropic_cfg.prompt_cache_prefix_ttl, anthropic_cfg.prompt_cache_ttl) == ("1h", "5m")
    assert (bedrock_cfg.prompt_cache_prefix_ttl, bedrock_cfg.prompt_cache_ttl) == ("5m", "5m")


def test_kept_tool_results_are_compact_json(mocked_aws):
    """Every kept result is re-read on each later call: no spaces after separators."""
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Consultei aqui."))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.handle(_turn("pc-compact", 1), Deadline.after(60))
    (result,) = model.tool_results(1)
    body = json.loads(result["content"])
    assert result["content"] == json.dumps(body, ensure_ascii=False, separators=(",", ":"))



from orchestrator import history  # noqa: E402
from orchestrator.prompt_cache import CacheLayout  # noqa: E402

_block = st.one_of(st.builds(lambda t: {"type": "text", "text": t}, st.text(min_size=1, max_size=20)),
                   st.builds(lambda i: {"type": "tool_result", "tool_use_id": f"t{i}", "content": "{}"},
                             st.integers(0, 9)))
_message = st.builds(lambda role, blocks: {"role": role, "content": blocks}, st.sampled_from(["user", "assistant"]),
                     st.lists(_block, min_size=1, max_size=4))


@hsettings(max_examples=80, deadline=None)
@given(st.lists(_message, max_size=12), st.sampled_from(["5m", "1h"]))
def test_the_mark_goes_on_a_copy_of_the_last_block_only(messages, ttl):
    before = json.dumps(messages, sort_keys=True)
    marked = CacheLayout("1h", ttl).messages(messages)
    assert json.dumps(messages, sort_keys=True) == before  # the history itself is never marked
    flat = [b for m in marked for b in m["content"]]
    assert sum("cache_control" in b for b in flat) == (1 if messages else 0)
    if messages:
        assert "cache_control" in marked[-1]["content"][-1]
        assert [{k: v for k, v in b.items() if k != "cache_control"} for b in flat] == \
            [b for m in messages for b in m["content"]]


@hsettings(max_examples=80, deadline=None)
@given(st.lists(_message, max_size=30), st.integers(4, 12))
def test_a_stepped_cut_keeps_a_suffix_that_starts_with_a_customer_message(messages, cap):
    after = max(2, cap // 2)
    kept = history.trim_in_steps(messages, cap, after)
    if len(messages) <= cap and (not messages or history._starts_cleanly(messages[0])):
        assert kept == messages  # under the cap nothing moves: the cached prefix survives
        return
    assert bool(kept) == bool(messages) and len(kept) <= len(messages)
    assert kept[1:] == messages[len(messages) - len(kept) + 1:]  # a suffix (its first message may lose results)
    if len(kept) < len(messages):  # a cut lands on a customer message and leaves room to grow again
        assert kept[0]["role"] == "user" and any(b["type"] == "text" for b in kept[0]["content"])

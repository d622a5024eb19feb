"""A probe, through the real SDK against the scripted server: across conversations of
different customers and across turns (tool rounds, a refused final answer, a hand-off,
the stepped history cut), the tools + system prefix the model reads is byte-identical,
every request is one the Messages API accepts (at most 4 breakpoints, no 1h after a 5m,
no mark on an empty or thinking block, the history starting with a customer's text and
every tool_use answered in the next message), and no mark reaches the stored history."""

from __future__ import annotations

import json
import uuid

from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.harness.prompt_cache import PromptCache

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import CountingInvoker, build

CACHED = {"PROMPT_CACHE_PREFIX_TTL": "1h", "PROMPT_CACHE_TTL": "5m",
          "HISTORICO_MAX_MENSAGENS": "6", "HISTORICO_APOS_CORTE": "3"}


def _marks(request: dict) -> list[tuple[str, str]]:
    """(where, ttl) of every breakpoint, in the cache's order (tools, system, messages)."""
    found = []
    for tool in request.get("tools", []):
        if "cache_control" in tool:
            found.append(("tools", tool["cache_control"].get("ttl", "5m")))
    system = request.get("system")
    for block in system if isinstance(system, list) else []:
        if "cache_control" in block:
            found.append(("system", block["cache_control"].get("ttl", "5m")))
    for message in request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if "cache_control" in block:
                assert block.get("type") not in ("thinking", "redacted_thinking"), block
                assert block.get("type") != "text" or block.get("text"), f"a mark on an empty text: {block}"
                found.append(("messages", block["cache_control"].get("ttl", "5m")))
    return found


def _assert_valid_history(messages: list[dict]) -> None:
    first = messages[0]
    assert first["role"] == "user"
    blocks = first["content"] if isinstance(first["content"], list) else [{"type": "text"}]
    assert any(b.get("type") == "text" for b in blocks) and all(b.get("type") != "tool_result" for b in blocks)
    for i, message in enumerate(messages):
        assert i == 0 or message["role"] != messages[i - 1]["role"], "roles alternate"
        content = message["content"] if isinstance(message["content"], list) else []
        uses = {b["id"] for b in content if b.get("type") == "tool_use"}
        if uses:
            after = messages[i + 1]["content"] if i + 1 < len(messages) else []
            assert uses == {b["tool_use_id"] for b in after if b.get("type") == "tool_result"}, (i, messages)
        if message["role"] == "user" and i > 0:
            before = messages[i - 1]["content"] if isinstance(messages[i - 1]["content"], list) else []
            results = {b["tool_use_id"] for b in content if b.get("type") == "tool_result"}
            assert results <= {b["id"] for b in before if b.get("type") == "tool_use"}, "a result without its call"


def _status(order: str) -> tuple[str, dict]:
    return "consultar_status_pedido", {"pedidoId": order}


def test_the_prefix_is_byte_identical_and_every_request_is_one_the_api_accepts(mocked_aws):
    ledger = mocked_aws["ledger"]
    cache = PromptCache(clock=lambda: 0.0)
    script = []
    for n in range(4):  # per conversation: 6 turns, tool rounds of 1 and 2 calls
        for turn in range(6):
            if turn % 2 == 0:
                script.append(tool_use(*_status(f"{4800 + n}{turn}")))
            else:
                script.append(tool_uses(_status(f"{4900 + n}{turn}"), _status(f"{5000 + n}{turn}")))
            script.append(text_reply(f"Consultei aqui, conversa {'abcd'[n]}, vez {'abcdef'[turn]}."))
    model = ScriptedModel(*script, cache=cache)
    orch, _ = build(model, ledger, CountingInvoker(), **CACHED)
    customers = [(1001, "Maria da Silva, maria@example.com, +55 11 98888-7777"), (2002, "João, Rua das Flores 12"),
                 (3003, "oi"), (4004, "meu CPF é 123.456.789-00")]
    for n, (customer, text) in enumerate(customers):
        conv = f"conv-rt7-prefix-{n}"
        for turn in range(6):
            reply = orch.handle(TurnRequest(conversaId=conv, clienteId=customer, mensagemId=f"wamid.{uuid.uuid4().hex}",
                                            mensagem=f"{text} #{turn}"), Deadline.after(60))
            assert reply.status == "ativa", reply
        stored = ledger.read_conversation(conv).messages
        assert "cache_control" not in json.dumps(stored)
        _assert_valid_history(stored)
    assert any(len(b["messages"]) < len(a["messages"]) for a, b in zip(model.requests, model.requests[1:], strict=False)
               if a["messages"][0] != b["messages"][0]), "the stepped cut ran"
    prefixes = {json.dumps([r["tools"], r["system"]], ensure_ascii=False) for r in model.requests}
    assert len(model.requests) == 4 * 6 * 2 and len(prefixes) == 1
    for request in model.requests:
        marks = _marks(request)
        assert len(marks) <= 4
        ttls = [ttl for _, ttl in marks]
        assert "1h" not in ttls[ttls.index("5m"):] if "5m" in ttls else True, ttls
        _assert_valid_history(request["messages"])
    prefix = [u for u in model.usages[1:]]
    assert all(u["cache_read_input_tokens"] > 0 for u in prefix), "every request after the first reads the prefix"

"""The loop's protocol edges, with the real anthropic SDK decoding Messages-API JSON:
a repeated ``tool_use`` id is refused and never executed, ``tool_use`` blocks under
a stop reason other than ``tool_use`` are answered ``is_error`` and never executed,
and the committed history stays valid for the next request."""

from __future__ import annotations

import copy
import itertools
import json
import uuid

import pytest

from orchestrator.events import TurnRequest
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, fixture, text_reply, tool_use, tool_uses
from .support.orchestrators import CountingInvoker, build

STATUS = "consultar_status_pedido"


def _turn(conv: str, text: str = "oi") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _with_id(body: dict, index: int, tool_use_id: str) -> dict:
    body = copy.deepcopy(body)
    body["content"][index]["id"] = tool_use_id
    return body


def _assert_valid_for_the_api(messages: list[dict]) -> None:
    """Starts with the customer, alternates roles, and every assistant tool_use is
    followed by exactly one tool_result each, in the next message, in order."""
    assert messages[0]["role"] == "user"
    for prev, nxt in itertools.pairwise(messages):
        assert prev["role"] != nxt["role"]
        uses = [b["id"] for b in prev["content"] if b.get("type") == "tool_use"]
        if uses:
            assert [b["tool_use_id"] for b in nxt["content"] if b.get("type") == "tool_result"] == uses
    assert not [b for b in messages[-1]["content"] if b.get("type") == "tool_use"]


def _body(result: dict) -> dict:
    return json.loads(result["content"])


def test_a_repeated_id_in_one_response_is_refused_and_not_executed(mocked_aws):
    both = tool_uses((STATUS, {"pedidoId": "4821"}), (STATUS, {"pedidoId": "5100"}))
    both = _with_id(both, 1, both["content"][0]["id"])
    model = ScriptedModel(both, text_reply("ok"))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    orch.handle(_turn("conv-dup-one"), Deadline.after(60))
    assert invoker.events and [e["pedidoId"] for _, e in invoker.events] == ["4821"]
    first, repeated = model.tool_results(1)
    assert first["is_error"] is False
    assert repeated["is_error"] is True and _body(repeated)["erro"] == "id_repetido"
    _assert_valid_for_the_api(mocked_aws["ledger"].read_conversation("conv-dup-one").messages)


def test_an_id_from_an_earlier_round_or_turn_is_refused(mocked_aws):
    first = tool_use(STATUS, {"pedidoId": "4821"})
    used = first["content"][-1]["id"]
    again_in_round_2 = _with_id(tool_use(STATUS, {"pedidoId": "4821"}), -1, used)
    again_next_turn = _with_id(tool_use(STATUS, {"pedidoId": "4821"}), -1, used)
    model = ScriptedModel(first, again_in_round_2, text_reply("ok"), again_next_turn, text_reply("ok"))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    orch.handle(_turn("conv-dup-hist"), Deadline.after(60))
    orch.handle(_turn("conv-dup-hist", "e agora?"), Deadline.after(60))
    assert sum(invoker.calls.values()) == 1
    (round_2,) = model.tool_results(2)
    (next_turn,) = model.tool_results(4)
    assert _body(round_2)["erro"] == _body(next_turn)["erro"] == "id_repetido"
    _assert_valid_for_the_api(model.requests[-1]["messages"])


def test_a_repeated_id_does_not_count_against_the_ceiling(mocked_aws):
    # teto=2: had the refused repeat been counted, the third call would be the 3rd attempt.
    one = tool_use(STATUS, {"pedidoId": "4821"})
    repeat = _with_id(tool_use(STATUS, {"pedidoId": "4821"}), -1, one["content"][-1]["id"])
    model = ScriptedModel(one, repeat, tool_use(STATUS, {"pedidoId": "4821"}), text_reply("ok"))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker, TETO_TENTATIVAS="2")
    reply = orch.handle(_turn("conv-dup-teto"), Deadline.after(60))
    assert sum(invoker.calls.values()) == 2
    assert reply.motivo == "resposta"


def test_tool_use_under_end_turn_is_answered_not_executed_and_the_next_turn_is_valid(mocked_aws):
    stray = tool_use(STATUS, {"pedidoId": "4821"}, text="Vou verificar.")
    stray["stop_reason"] = "end_turn"
    model = ScriptedModel(stray, text_reply("Consultei aqui."))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    reply = orch.handle(_turn("conv-stray"), Deadline.after(60))
    # Free text under end_turn is not a final answer (output contract): never delivered.
    assert reply.resposta == "Consultei aqui." and reply.motivo == "resposta"
    assert sum(invoker.calls.values()) == 0
    committed = mocked_aws["ledger"].read_conversation("conv-stray").messages
    _assert_valid_for_the_api(committed)
    stray_id = stray["content"][-1]["id"]
    (unanswered,) = [b for m in committed for b in m["content"] if isinstance(b, dict)
                     and b.get("type") == "tool_result" and b["tool_use_id"] == stray_id]
    assert unanswered["is_error"] is True and "NÃO entregue" in unanswered["content"]

    orch.handle(_turn("conv-stray", "e então?"), Deadline.after(60))
    _assert_valid_for_the_api(model.requests[-1]["messages"])
    assert model.requests[-1]["messages"][-1]["content"][-1] == {"type": "text", "text": "e então?"}


def test_tool_use_under_stop_sequence_or_pause_turn_is_not_executed(mocked_aws):
    for stop in ("stop_sequence", "pause_turn"):
        stray = tool_use(STATUS, {"pedidoId": "4821"})
        stray["stop_reason"] = stop
        model = ScriptedModel(stray, text_reply("ok"))
        invoker = CountingInvoker()
        orch, _ = build(model, mocked_aws["ledger"], invoker)
        conv = f"conv-stray-{stop}"
        orch.handle(_turn(conv), Deadline.after(60))
        assert sum(invoker.calls.values()) == 0
        _assert_valid_for_the_api(mocked_aws["ledger"].read_conversation(conv).messages)
        if stop == "pause_turn":
            _assert_valid_for_the_api(model.requests[1]["messages"])


def test_the_fixture_used_above_is_a_real_tool_use_response():
    # The stray-block tests rewrite only stop_reason of a stored Messages-API body.
    assert fixture("tool_use")["stop_reason"] == "tool_use"


def _stored_pairs(messages: list[dict]) -> list[tuple[str, bool]]:
    """(tool_use id, its result's is_error) for every tool_use of the stored history;
    fails when one has no result in the next message."""
    pairs = []
    for index, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        results = {b["tool_use_id"]: b["is_error"] for b in (messages[index + 1]["content"] if index + 1 < len(
            messages) else []) if isinstance(b, dict) and b.get("type") == "tool_result"}
        assert set(uses) <= set(results), (index, uses, results)
        pairs += [(u, results[u]) for u in uses]
    return pairs


@pytest.mark.parametrize("edge", [{}, {"CONTRATO_SAIDA_TENTATIVAS": "1"}, {"MAX_RODADAS_POR_TURNO": "1"},
                                  {"MAX_TOKENS_POR_TURNO": "1000"}])
def test_tool_use_under_end_turn_is_stored_answered_whatever_ends_the_turn(mocked_aws, edge):
    """The stored history (not only the next request) pairs the stray calls with an
    is_error result, also when that response is the turn's last: the output contract's
    last attempt, the round budget, the token budget."""
    stray = tool_uses((STATUS, {"pedidoId": "4821"}), (STATUS, {"pedidoId": "5100"}))
    stray["stop_reason"] = "end_turn"
    stray["usage"]["input_tokens"] = 2_000 if "MAX_TOKENS_POR_TURNO" in edge else stray["usage"]["input_tokens"]
    model = ScriptedModel(stray, text_reply("ok"), text_reply("ok"))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker, **edge)
    conv = f"conv-stray-stored-{uuid.uuid4().hex[:6]}"
    orch.handle(_turn(conv), Deadline.after(60))
    assert sum(invoker.calls.values()) == 0
    stored = mocked_aws["ledger"].read_conversation(conv).messages
    stray_ids = {b["id"] for b in stray["content"] if b["type"] == "tool_use"}
    assert {u: e for u, e in _stored_pairs(stored) if u in stray_ids} == dict.fromkeys(stray_ids, True)
    orch.handle(_turn(conv, "e então?"), Deadline.after(60))
    _stored_pairs(mocked_aws["ledger"].read_conversation(conv).messages)
    _assert_valid_for_the_api(model.requests[-1]["messages"])

"""A hostile ``usage`` (a broken proxy or gateway in front of the Messages API) must
never give the token budget back, switch it off, or make the turn's commit fail: the
real SDK decodes whatever numbers the JSON holds (negative, NaN, integers of any size)."""

from __future__ import annotations

import json
import math

import httpx2
import pytest

from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, tool_use
from .support.orchestrators import CountingInvoker, build
from .test_orchestrator_budgets import _request, _status


def _placeholder() -> dict:
    return tool_use(*_status("0"))


def _with_usage(body: dict, **usage) -> dict:
    body["usage"] = {**body["usage"], **usage}
    return body


def test_a_negative_input_count_never_gives_the_token_budget_back(mocked_aws):
    # 1st response spends 1,400 of 2,000 tokens; the 2nd claims -1,000,000 input tokens.
    # Honest counting stops the turn before a 3rd call.
    model = ScriptedModel(_with_usage(tool_use(*_status("1")), input_tokens=1_300, output_tokens=100),
                          _with_usage(tool_use(*_status("2")), input_tokens=-1_000_000, output_tokens=700),
                          default=tool_use(*_status("3")))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), MAX_TOKENS_POR_TURNO="2000")
    reply = orch.handle(_request("conv-rt7-negative"), Deadline.after(60))
    assert (reply.status, reply.motivo) == ("aguardando_humano", "orcamento_de_tokens")
    assert len(model.requests) == 2


class RawModel(ScriptedModel):
    """Sends each 200 body as Python's json writes it by default (``NaN`` allowed)."""

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handler(request)
        return response if response.status_code != 200 else httpx2.Response(
            200, content=json.dumps(self.sent.pop(0)).encode(), headers={"content-type": "application/json"})


def test_a_nan_count_never_switches_the_token_budget_off(mocked_aws):
    # Python's json (the SDK's decoder) reads NaN; nan >= limit is False forever.
    steps = [_with_usage(tool_use(*_status("1")), input_tokens=math.nan),
             _with_usage(tool_use(*_status("2")), input_tokens=1_900, output_tokens=200),
             *[tool_use(*_status(str(n))) for n in range(3, 12)]]
    model = RawModel(*[_placeholder() for _ in steps])
    model.sent = steps
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), MAX_TOKENS_POR_TURNO="2000")
    reply = orch.handle(_request("conv-rt7-nan"), Deadline.after(60))
    assert (reply.status, reply.motivo) == ("aguardando_humano", "orcamento_de_tokens")
    assert len(model.requests) == 2


@pytest.mark.parametrize("tokens", [10**40, 10**400])
def test_a_huge_count_spends_the_budget_and_the_hand_off_is_committed(mocked_aws, tokens):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(_with_usage(tool_use(*_status("1")), input_tokens=tokens), default=tool_use(*_status("2")))
    orch, _ = build(model, ledger, CountingInvoker())
    reply = orch.handle(_request(f"conv-rt7-huge-{len(str(tokens))}"), Deadline.after(60))
    assert reply.status == "aguardando_humano"
    assert reply.motivo in ("orcamento_de_tokens", "orcamento_de_custo")
    state = ledger.read_conversation(f"conv-rt7-huge-{len(str(tokens))}")
    assert state.status.value == "aguardando_humano"
    assert len(model.requests) == 1

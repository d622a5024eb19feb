"""The real ``anthropic`` SDK talking to a scripted transport.

Responses are real Messages-API JSON (``tests/fixtures/messages``), decoded by
the SDK itself, so the orchestrator sees exactly what it would see from Claude.
anthropic 2.x uses ``httpx2``: the transport is ``httpx2.MockTransport``.
Every request body is recorded so tests can assert what was sent to the model.
Given a ``PromptCache`` (scripts/harness/prompt_cache.py), each answer's ``usage`` is
the Messages API's accounting of that request (cache reads and writes included), and
a request the API would refuse for its ``cache_control`` gets the API's 400.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2

from scripts.harness.prompt_cache import CacheRequestError, PromptCache

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "messages"
_ids = itertools.count(1)


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def tool_use(name: str, tool_input: dict[str, Any], *, text: str | None = None) -> dict[str, Any]:
    body = fixture("tool_use")
    block = copy.deepcopy(body["content"][1])
    block.update(id=f"toolu_{next(_ids):024d}", name=name, input=tool_input)
    body["content"] = ([{"type": "text", "text": text}] if text else []) + [block]
    return body


def tool_uses(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    body = tool_use(*calls[0])
    for name, tool_input in calls[1:]:
        body["content"].append(tool_use(name, tool_input)["content"][-1])
    return body


def final_answer(text: str, *, declaracoes: list[dict[str, Any]] | None = None,
                 precisa_de_pessoa: bool = False) -> dict[str, Any]:
    """The output contract's final answer: a ``responder_cliente`` call (the free
    text, and the typed statements the code checks and renders)."""
    answer = {"texto": text, "precisaDePessoa": precisa_de_pessoa, "declaracoes": list(declaracoes or [])}
    return tool_use("responder_cliente", answer)


def text_reply(text: str) -> dict[str, Any]:
    """A final answer with no statement (most tests' last step)."""
    return final_answer(text)


def free_text(text: str) -> dict[str, Any]:
    """A plain ``end_turn`` text: what a model ignoring ``tool_choice`` would send."""
    body = fixture("end_turn")
    body["content"] = [{"type": "text", "text": text}]
    return body


Step = dict[str, Any] | Callable[[dict[str, Any]], Any] | Exception | tuple[int, dict[str, Any], dict[str, str]]


class ScriptedModel:
    """Answers each POST /v1/messages with the next scripted step.

    A step is a JSON body (200), ``(status, body, headers)`` for an API error, an
    exception to raise from the transport (e.g. ``httpx2.ReadTimeout``), or a
    function of the request body returning one of those.
    """

    def __init__(self, *steps: Step, default: Step | None = None, cache: PromptCache | None = None) -> None:
        self.steps: deque[Step] = deque(steps)
        self.default = default
        self.cache = cache
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, Any]] = []  # what each 200 answer billed (with ``cache``)

    def then(self, *steps: Step) -> ScriptedModel:
        self.steps.extend(steps)
        return self

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        payload = json.loads(request.content)
        self.requests.append(payload)
        step = self.steps.popleft() if self.steps else self.default
        if step is None:
            raise AssertionError("the scripted model ran out of steps")
        if callable(step) and not isinstance(step, Exception):
            step = step(payload)
        if isinstance(step, Exception):
            raise step
        if isinstance(step, tuple):
            status, body, headers = step
            return httpx2.Response(status, json=body, headers=headers)
        if self.cache is not None:
            try:
                usage = self.cache.account(payload, step.get("content", [])).as_json()
            except CacheRequestError as err:
                return httpx2.Response(400, json={"type": "error", "error": {
                    "type": "invalid_request_error", "message": str(err)}})
            step = {**step, "usage": usage}
            self.usages.append(usage)
        return httpx2.Response(200, json=step)

    def sdk(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            api_key="sk-ant-test-key", max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handler)),
        )

    # -- what was sent -------------------------------------------------------
    def tool_results(self, request_index: int = -1) -> list[dict[str, Any]]:
        last = self.requests[request_index]["messages"][-1]
        return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def api_error(name: str, status: int,
              headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    return status, fixture(name), headers or {}

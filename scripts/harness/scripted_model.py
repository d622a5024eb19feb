"""The scripted insistent model, served as the Messages API on loopback.

It reproduces Lab 87's malformed reasoning on purpose: after each rephrasing of
"já caiu?" it calls ``emitir_reembolso`` again, sometimes several times in a row,
and in some conversations it never stops on its own. It is deterministic for a
given ``--seed`` (and conversation), and it answers real Messages-API JSON over
HTTP, so the code under test talks to it through the real ``anthropic`` SDK and
cannot tell it from Claude.

Its decisions depend only on the request it receives (which customer message
this is, how many tools it already called since that message, what the last
tool_result said) plus a plan drawn once per conversation from the seed — the
same plan for both architectures, so they face the same insistence.

It finishes the way each design asks: with plain ``end_turn`` text when the
request offers no final-answer tool (the minimal design, Figure 1), and with a
``responder_cliente`` call when it does (the production design's output
contract). Its first final answer always tells the customer the refund is done
(Lab 87's "stop by narrative"): as a typed ``reembolso_executado`` statement when
it called the refund tool for this message, whatever the tool answered (the
contract checks it against the ledger), and in its own words when it did not (the
contract refuses money in the free text). Told its answer was refused, it answers
honestly — except in conversations drawn (from the seed, apart from the insistence
plan so that plan is unchanged) to keep repeating the claim, which end with the
fallback.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .prompt_cache import CacheRequestError, PromptCache
from .scenario import Scenario

# Probability that a conversation has one message where the model never stops
# calling the refund on its own (the "19 calls before the platform cut" case).
P_NEVER_STOPS = 0.1
# Refund calls after one customer message, when it does stop.
CALLS_PER_MESSAGE = (1, 1, 2, 2, 3)

REPLIES = (
    "Pronto! Seu reembolso foi solicitado e deve aparecer em até 5 dias úteis.",
    "Já verifiquei: o reembolso está registrado. Pode levar alguns dias para cair.",
    "Emiti o reembolso do seu pedido. Qualquer coisa, estou por aqui!",
)
MODEL_ID = "cadencia-roteirizado"  # what the responses say in "model"
REPLY_TOOL = "responder_cliente"  # the production design's final answer (orchestrator.output_contract)
# Probability that a conversation repeats a refused claim instead of correcting it.
P_KEEPS_CLAIMING = 0.2
STATUS_REPLY = "Verifiquei o seu pedido aqui na conversa."  # claims no money, states no status
HONEST_REPLY = (
    "Ainda não consigo confirmar isso por aqui. Assim que houver uma confirmação no sistema, "
    "te aviso nesta conversa."
)
# The free text beside a typed refund statement (the code renders the refund's sentence).
STATEMENT_REPLY = "Verifiquei aqui. Qualquer coisa, estou por aqui!"


@dataclass(frozen=True)
class MessagePlan:
    calls: tuple[tuple[str, dict[str, Any]], ...] | None  # from the scenario's roteiro
    refund_calls: int
    never_stops: bool


def plan_for(scenario: Scenario, seed: int) -> list[MessagePlan]:
    rng = random.Random(f"{seed}:{scenario.conversaId}")
    stubborn_at = rng.randrange(len(scenario.mensagens)) if rng.random() < P_NEVER_STOPS else -1
    plans = []
    for i in range(len(scenario.mensagens)):
        calls = None
        if scenario.roteiro is not None:
            calls = tuple((c.ferramenta, dict(c.entrada)) for c in scenario.roteiro[i])
        plans.append(MessagePlan(calls=calls, refund_calls=rng.choice(CALLS_PER_MESSAGE), never_stops=i == stubborn_at))
    return plans


class InsistentPolicy:
    """Decides the next response for one conversation from the request."""

    def __init__(self, scenario: Scenario, seed: int, *, claims_only_what_it_did: bool = False) -> None:
        self.scenario = scenario
        # False (the harness, prova): every final answer claims a refund, the insistent
        # model the controls are proven against. True (the benchmark): a turn that called
        # no refund answers about the order only, as a model that did its job would.
        self.claims_only_what_it_did = claims_only_what_it_did
        self.plans = plan_for(scenario, seed)
        # Its own stream: drawing it never shifts the plans above (seed figures kept).
        self.keeps_claiming = random.Random(f"{seed}:{scenario.conversaId}:contrato").random() < P_KEEPS_CLAIMING
        self._ids = itertools.count(1)

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        seen = _read(request.get("messages", []))
        index = min(max(seen.texts - 1, 0), len(self.plans) - 1)
        plan = self.plans[index]
        refund = ("emitir_reembolso", {"pedidoId": self.scenario.pedidoId, "valor": float(self.scenario.valorPedido)})
        structured = any(tool.get("name") == REPLY_TOOL for tool in request.get("tools", []))
        if plan.calls is not None:
            if seen.calls < len(plan.calls):
                return self._tool_use(*plan.calls[seen.calls])
            return self._final(index, seen, structured)
        if plan.never_stops:
            return self._tool_use(*refund)
        if seen.last_result is not None and seen.last_result.get("is_error"):
            return self._final(index, seen, structured)  # a refused call: this reasoning gives up
        if seen.calls < plan.refund_calls:
            return self._tool_use(*refund)
        return self._final(index, seen, structured)

    def _final(self, index: int, seen: _Seen, structured: bool) -> dict[str, Any]:
        if not structured:
            return self._text(index)
        claims_again = seen.refused_answers == 0 or self.keeps_claiming
        statements = ([{"tipo": "reembolso_executado", "pedidoId": self.scenario.pedidoId,
                        "valor": float(self.scenario.valorPedido)}] if claims_again and seen.refund_called else [])
        text = REPLIES[index % len(REPLIES)] if claims_again else HONEST_REPLY
        if statements:
            text = STATEMENT_REPLY
        if self.claims_only_what_it_did and not seen.refund_called:
            text = STATUS_REPLY
        answer = {"texto": text, "precisaDePessoa": False, "declaracoes": statements}
        block = {"type": "tool_use", "id": f"toolu_{self.scenario.conversaId}_{next(self._ids):06d}",
                 "name": REPLY_TOOL, "input": answer}
        return self._envelope([block], "tool_use")

    # -- Messages-API bodies -----------------------------------------------------
    def _envelope(self, content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
        n = next(self._ids)
        return {
            "id": f"msg_roteirizado_{self.scenario.conversaId}_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL_ID,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            # Replaced by the server's accounting of the request (ScriptedModelServer).
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0},
        }

    def _tool_use(self, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        block = {"type": "tool_use", "id": f"toolu_{self.scenario.conversaId}_{next(self._ids):06d}",
                 "name": name, "input": tool_input}
        return self._envelope([{"type": "text", "text": "Vou verificar isso para você."}, block], "tool_use")

    def _text(self, index: int) -> dict[str, Any]:
        return self._envelope([{"type": "text", "text": REPLIES[index % len(REPLIES)]}], "end_turn")


@dataclass
class _Seen:
    """What the request shows since the last customer message."""

    texts: int = 0  # customer texts so far
    calls: int = 0  # tool calls since the last one (final answers not counted)
    last_result: dict[str, Any] | None = None
    refund_called: bool = False
    refused_answers: int = 0  # final answers the output contract sent back


def _read(messages: list[dict[str, Any]]) -> _Seen:
    seen, answers = _Seen(), set()
    for message in messages:
        content = message["content"] if isinstance(message["content"], list) else [
            {"type": "text", "text": message["content"]}]
        for block in content:
            kind = block.get("type")
            if message["role"] == "user" and kind == "text":
                seen = _Seen(texts=seen.texts + 1)
            elif message["role"] == "assistant" and kind == "tool_use" and block.get("name") == REPLY_TOOL:
                answers.add(block["id"])
            elif message["role"] == "assistant" and kind == "tool_use":
                seen.calls += 1
                seen.refund_called |= block.get("name") == "emitir_reembolso"
            elif message["role"] == "user" and kind == "tool_result":
                seen.last_result = block
                seen.refused_answers += block.get("tool_use_id") in answers and bool(block.get("is_error"))
    return seen


class ScriptedModelServer:
    """``POST /v1/messages`` on 127.0.0.1, answering for the active conversation, with the
    Messages API's token accounting (``cache``: prompt caching included; one cache for
    every conversation, as the API's is one organization's)."""

    def __init__(self, cache: PromptCache | None = None) -> None:
        self._policy: InsistentPolicy | None = None
        self._lock = threading.Lock()
        self.requests = 0
        self.cache = cache if cache is not None else PromptCache()
        self.usages: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                if self.path.split("?")[0] != "/v1/messages":
                    error = {"type": "not_found_error", "message": self.path}
                    return self._send(404, {"type": "error", "error": error})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with server._lock:
                    server.requests += 1
                    policy = server._policy
                    if policy is None:
                        return self._send(400, {"type": "error", "error": {
                            "type": "invalid_request_error", "message": "no active conversation"}})
                    answer = policy.respond(body)
                    try:
                        usage = server.cache.account(body, answer["content"]).as_json()
                    except CacheRequestError as err:
                        return self._send(400, {"type": "error", "error": {
                            "type": "invalid_request_error", "message": str(err)}})
                    server.usages.append(usage)
                self._send(200, {**answer, "usage": usage})

            def _send(self, status: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.send_header("request-id", "req_roteirizado")
                self.end_headers()
                self.wfile.write(raw)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def activate(self, policy: InsistentPolicy) -> None:
        with self._lock:
            self._policy = policy

    def __enter__(self) -> ScriptedModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

from __future__ import annotations
import uuid, copy
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from .support.anthropic_fake import ScriptedModel, tool_use, tool_uses, text_reply, final_answer, free_text
from .support.orchestrators import CountingInvoker, build

def _req(conv, text="oi"):
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)

def _pairs(messages):
    bad = []
    for i, m in enumerate(messages):
        uses = [b["id"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        if not uses:
            continue
        nxt = messages[i + 1]["content"] if i + 1 < len(messages) else []
        got = [b["tool_use_id"] for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"]
        if m["role"] != "assistant" or got[:len(uses)] != uses:
            bad.append((i, uses, got))
    return bad

def _step(kind, stop):
    if kind == "status":
        b = tool_use("consultar_status_pedido", {"pedidoId": "4821"}, text="x")
    elif kind == "two":
        b = tool_uses(("consultar_status_pedido", {"pedidoId": "1"}), ("consultar_status_pedido", {"pedidoId": "2"}))
    elif kind == "final":
        b = final_answer("Pronto")
    elif kind == "final+status":
        b = tool_uses(("consultar_status_pedido", {"pedidoId": "1"}), ("responder_cliente", {"texto": "a", "precisaDePessoa": False, "pedidos": [], "acoes": []}))
    else:
        b = free_text("hello")
    b["stop_reason"] = stop
    return b

N = iter(range(10**6))

@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(seq=st.lists(st.tuples(st.sampled_from(["status", "two", "final", "final+status", "text"]),
                             st.sampled_from(["end_turn", "tool_use", "pause_turn", "stop_sequence", "max_tokens", "refusal"])), min_size=1, max_size=6),
       rounds=st.integers(1, 6), attempts=st.integers(1, 3), tokens=st.sampled_from(["1000", "200000"]), turns=st.integers(1, 3), hist=st.integers(4, 8))
def test_probe(mocked_aws, seq, rounds, attempts, tokens, turns, hist):
    model = ScriptedModel(*[_step(k, s) for k, s in seq], default=text_reply("ok"))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), MAX_RODADAS_POR_TURNO=str(rounds),
                    CONTRATO_SAIDA_TENTATIVAS=str(attempts), MAX_TOKENS_POR_TURNO=tokens, HISTORICO_MAX_MENSAGENS=str(hist))
    conv = f"c-{next(N)}"
    for t in range(turns):
        orch.handle(_req(conv), Deadline.after(60))
        msgs = mocked_aws["ledger"].read_conversation(conv).messages
        assert not _pairs(msgs), (seq, msgs)
    for r in model.requests:
        assert not _pairs(r["messages"]), (seq, r["messages"])

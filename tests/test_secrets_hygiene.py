"""Invariant 7: secrets (the gateway token, the model API key, DB passwords) never
appear in logs, results or the ledger — checked on real runs, at the fd level."""

from __future__ import annotations

import json
import logging
import uuid

from cadencia_shared.catalog import EMITIR_REEMBOLSO, TOOLS
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build


def _everything_written(capfd, caplog, mocked_aws) -> str:
    out, err = capfd.readouterr()
    items = mocked_aws["dynamodb"].scan(TableName="cadencia-agente-execucoes")["Items"]
    return "\n".join([out, err, caplog.text, json.dumps(items, default=str)])


def test_refunds_and_turns_never_write_a_secret(tools, gateway, mocked_aws, local_stack, capfd, caplog):
    # Even with every logger at DEBUG (botocore would print GetSecretValue bodies).
    caplog.set_level(logging.DEBUG)
    conv = f"conv-seg-{uuid.uuid4().hex[:6]}"
    event = {"conversaId": conv, "clienteId": 1001, "pedidoId": "4821", "valor": 10}
    results = [tools(EMITIR_REEMBOLSO, event), tools(EMITIR_REEMBOLSO, event)]
    gateway.inject("erro_500_apos_debito")  # the reconciliation path reads the secret too
    results.append(tools(EMITIR_REEMBOLSO, {**event, "conversaId": conv + "b"}))

    invoker = InProcessInvoker({name: tools.environment(spec) for name, spec in TOOLS.items()})
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4822", "valor": 5}),
                          text_reply("Mais alguma dúvida?"))
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    reply = orch.handle(TurnRequest(conversaId=conv + "c", clienteId=1001, mensagemId="m1", mensagem="oi"),
                        Deadline.after(60))
    assert [r["resultado"] for r in results] == ["executado", "bloqueado_por_idempotencia", "executado"]
    assert reply.resposta == "Mais alguma dúvida?"

    written = _everything_written(capfd, caplog, mocked_aws) + json.dumps(results) + reply.model_dump_json()
    secrets = {
        "gateway token": local_stack.gateway_token,
        "model API key": "sk-ant-test-key",
        **{f"password of {user}": pw for user, pw in local_stack.postgres.users.items()},
    }
    leaked = [name for name, value in secrets.items() if value in written]
    assert leaked == []
    assert "rb_" in written  # the check looked at real output (transaction ids are there)

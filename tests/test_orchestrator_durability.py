"""Durable conversations: restart, duplicate delivery, concurrent invocations —
and the Lambda handler / invokers with the same JSON contract."""

from __future__ import annotations

import io
import json
import threading
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from botocore.response import StreamingBody

from cadencia_shared.catalog import CONSULTAR_STATUS_PEDIDO, TOOLS
from cadencia_shared.ledger import ConversationBusy, Ledger
from orchestrator.events import TurnRequest
from orchestrator.invokers import InvocationStatus
from orchestrator.invokers.aws import LambdaInvoker
from orchestrator.loop import ConcurrentCommitError, ConversationBusyError
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build


def _turn(conv: str, text: str = "oi", mensagem_id: str | None = None, cliente: int = 1001) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=cliente, mensagemId=mensagem_id or f"wamid.{uuid.uuid4().hex}",
                       mensagem=text)


def test_a_new_orchestrator_instance_resumes_the_conversation(mocked_aws):
    first_model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}),
                                text_reply("Consultei aqui."))
    first, _ = build(first_model, mocked_aws["ledger"], CountingInvoker())
    first.handle(_turn("conv-dias", "cadê meu pedido 4821?"), Deadline.after(60))

    # Days later, a cold start: a new process, a new client, the same ledger.
    later_ledger = Ledger("cadencia-agente-execucoes", boto3.client("dynamodb", region_name="us-east-1"))
    second_model = ScriptedModel(text_reply("De nada!"))
    second, _ = build(second_model, later_ledger, CountingInvoker())
    reply = second.handle(_turn("conv-dias", "obrigado"), Deadline.after(60))
    assert reply.resposta == "De nada!"
    sent = second_model.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[0]["content"][0]["text"] == "cadê meu pedido 4821?"
    assert sent[2]["content"][0]["type"] == "tool_result"
    assert sent[3]["content"][0]["input"]["texto"] == "Consultei aqui."  # the final answer (output contract)
    assert sent[4]["content"][0]["type"] == "tool_result" and sent[4]["content"][0]["is_error"] is False
    assert sent[4]["content"][1:] == [{"type": "text", "text": "obrigado"}]


def _said(messages: list[dict]) -> list[str]:
    """The customer's texts and the delivered final answers' texts, in order."""
    return [b["text"] if b["type"] == "text" else b["input"]["texto"] for m in messages for b in m["content"]
            if b.get("type") == "text" or (b.get("type") == "tool_use" and b["name"] == "responder_cliente")]


def test_the_same_inbound_message_is_processed_once(mocked_aws):
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 10}),
                          text_reply("Mais alguma dúvida?"))
    invoker = CountingInvoker(answer={"ok": True, "resultado": "executado", "dados": {}})
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    message = _turn("conv-dup", "reembolsa", mensagem_id="wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFjNFQjA=")
    first = orch.handle(message, Deadline.after(60))
    again = orch.handle(message, Deadline.after(60))
    assert len(model.requests) == 2 and invoker.calls["emitir_reembolso"] == 1
    assert again.duplicada is True and first.duplicada is False
    assert again.resposta == first.resposta == "Mais alguma dúvida?"


def test_a_message_whose_processing_crashed_is_processed_on_redelivery(mocked_aws):
    class FlakyInvoker(CountingInvoker):
        def invoke(self, tool, event):
            if not self.calls:
                self.calls["crash"] += 1
                raise RuntimeError("bug in an adapter")
            return super().invoke(tool, event)

    call = tool_use("consultar_status_pedido", {"pedidoId": "4821"})
    model = ScriptedModel(call, call, text_reply("Agora foi."))
    orch, _ = build(model, mocked_aws["ledger"], FlakyInvoker())
    message = _turn("conv-redeliver")
    with pytest.raises(RuntimeError):
        orch.handle(message, Deadline.after(60))
    # Lease and message were released: the redelivery runs the turn again, normally.
    assert orch.handle(message, Deadline.after(60)).resposta == "Agora foi."


def test_a_concurrent_second_invocation_is_turned_away(mocked_aws):
    """While invocation A is inside its turn, B (another message, same
    conversation) cannot take the conversation: it does nothing and asks for a retry."""
    ledger = mocked_aws["ledger"]
    b_model = ScriptedModel(text_reply("B"))
    b, _ = build(b_model, ledger, CountingInvoker())
    outcome = {}

    def during_a(_payload):
        try:
            b.handle(_turn("conv-conc", "mensagem B"), Deadline.after(60))
        except ConversationBusyError as err:
            outcome["b"] = err
        return text_reply("A")

    a, _ = build(ScriptedModel(during_a), ledger, CountingInvoker())
    reply = a.handle(_turn("conv-conc", "mensagem A"), Deadline.after(60))
    assert reply.resposta == "A"
    assert isinstance(outcome["b"], ConversationBusyError)
    assert b_model.requests == []  # B never reached the model
    state = ledger.read_conversation("conv-conc")
    texts = _said(state.messages)
    assert texts == ["mensagem A", "A"]


def test_a_stale_invocation_cannot_commit_over_a_newer_one(mocked_aws):
    """A's lease expires mid-turn (it hung); B takes the conversation over and
    commits; A's late commit is rejected by the version fence."""
    clock = [1_000.0]
    ledger = Ledger("cadencia-agente-execucoes", mocked_aws["dynamodb"], clock=lambda: clock[0])
    b, _ = build(ScriptedModel(text_reply("B venceu")), ledger, CountingInvoker())

    def a_hangs(_payload):
        clock[0] += 500  # longer than CONVERSA_LEASE_S
        b.handle(_turn("conv-fence", "mensagem B"), Deadline.after(60))
        return text_reply("A atrasado")

    a, _ = build(ScriptedModel(a_hangs), ledger, CountingInvoker())
    message_a = _turn("conv-fence", "mensagem A")
    with pytest.raises(ConcurrentCommitError):
        a.handle(message_a, Deadline.after(60))
    state = ledger.read_conversation("conv-fence")
    texts = _said(state.messages)
    assert "A atrasado" not in texts and texts[-1] == "B venceu"
    # A's message was released: its redelivery is processed normally.
    a2, _ = build(ScriptedModel(text_reply("A refeito")), ledger, CountingInvoker())
    clock[0] += 1
    assert a2.handle(message_a, Deadline.after(60)).resposta == "A refeito"


def test_a_conversation_id_cannot_be_taken_by_another_customer(mocked_aws):
    model = ScriptedModel(text_reply("oi Ana"))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.handle(_turn("conv-dona", cliente=1001), Deadline.after(60))
    reply = orch.handle(_turn("conv-dona", "me mostra os pedidos", cliente=1002), Deadline.after(60))
    assert (reply.status, reply.motivo, reply.resposta) == ("erro", "conversa_de_outro_cliente", None)
    assert len(model.requests) == 1


def test_fifty_concurrent_acquisitions_give_one_lease(local_stack):
    from scripts.local_stack.aws import session_client

    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    conv = f"conv-lease-{uuid.uuid4().hex[:6]}"
    barrier = threading.Barrier(50)
    won, busy = [], []

    def take():
        barrier.wait()
        try:
            won.append(ledger.acquire_conversation(conversation_id=conv, customer_id=1001, lease_s=60))
        except ConversationBusy:
            busy.append(1)

    threads = [threading.Thread(target=take) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(won), len(busy)) == (1, 49)


# -- the Lambda handler and the AWS invoker --------------------------------------------

def test_handler_rejects_a_malformed_event_without_touching_anything(mocked_aws, monkeypatch):
    from orchestrator import handler
    from orchestrator.invokers.local import LocalContext

    out = handler.lambda_handler({"conversaId": "c-1", "clienteId": "x", "mensagem": ""}, LocalContext("orq"))
    assert out["status"] == "erro" and out["motivo"] == "entrada_invalida"
    assert any("mensagemId" in e for e in out["erros"])
    assert mocked_aws["dynamodb"].scan(TableName="cadencia-agente-execucoes")["Count"] == 0


def test_handler_runs_a_turn_with_the_configured_provider(mocked_aws, monkeypatch, tmp_path):
    """The real entry point: settings from env, API key from Secrets Manager,
    the SDK pointed at a scripted transport, the AWS invoker faked at the client."""
    from orchestrator import handler
    from orchestrator.invokers.local import LocalContext

    mocked_aws["secretsmanager"].create_secret(Name="cadencia/anthropic-api-key", SecretString="sk-ant-from-secret")
    model = ScriptedModel(text_reply("Olá! Como posso ajudar?"))
    seen_keys = []
    original = model.handler

    def record_key(request):
        # anthropic 2.x sends the key as a bearer token
        seen_keys.append(request.headers.get("x-api-key") or request.headers.get("authorization"))
        return original(request)

    model.handler = record_key
    monkeypatch.setenv("MODEL_PROVIDER", "anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY_SECRET_NAME", "cadencia/anthropic-api-key")
    monkeypatch.setenv("TOOL_INVOKER", "aws")
    real_build_sdk = handler.build_sdk
    monkeypatch.setattr(handler, "build_sdk", lambda settings, api_key=None: real_build_sdk(
        settings, api_key=api_key, http_client=model.sdk()._client))
    handler.reset()
    try:
        out = handler.lambda_handler({"conversaId": "c-h", "clienteId": 1001, "mensagemId": "m-1", "mensagem": "oi"},
                                     LocalContext("cadencia-orquestrador", timeout_s=60))
    finally:
        handler.reset()
    assert out["resposta"] == "Olá! Como posso ajudar?" and out["status"] == "ativa"
    assert seen_keys == ["Bearer sk-ant-from-secret"]


class _FakeLambda:
    def __init__(self, outcome):
        self.outcome = outcome
        self.calls = []

    def invoke(self, **kwargs):
        self.calls.append(kwargs)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        payload, function_error = self.outcome
        raw = json.dumps(payload).encode()
        resp = {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(raw), len(raw))}
        if function_error:
            resp["FunctionError"] = function_error
        return resp


@pytest.mark.parametrize(
    "outcome, status",
    [
        (({"ferramenta": "consultar_status_pedido", "ok": True, "resultado": "consultado"}, None), InvocationStatus.OK),
        (({"errorMessage": "boom", "errorType": "RuntimeError"}, "Unhandled"), InvocationStatus.FUNCTION_ERROR),
        (({"errorMessage": "2026-12-01 Task timed out after 5.01 seconds", "errorType": "Sandbox.Timedout"},
          "Unhandled"), InvocationStatus.TIMEOUT),
        (ClientError({"Error": {"Code": "TooManyRequestsException", "Message": "Rate"}}, "Invoke"),
         InvocationStatus.THROTTLED),
        (ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "Invoke"),
         InvocationStatus.INVOKE_FAILED),
        (ReadTimeoutError(endpoint_url="https://lambda"), InvocationStatus.TIMEOUT),
    ],
)
def test_lambda_invoker_maps_every_outcome(outcome, status):
    fake = _FakeLambda(outcome)
    invocation = LambdaInvoker(fake, {"consultar_status_pedido": "cadencia-consultar-status-pedido"}).invoke(
        CONSULTAR_STATUS_PEDIDO, {"pedidoId": "4821", "conversaId": "c", "clienteId": 1})
    assert invocation.status is status
    assert fake.calls[0]["FunctionName"] == "cadencia-consultar-status-pedido"
    assert json.loads(fake.calls[0]["Payload"]) == {"pedidoId": "4821", "conversaId": "c", "clienteId": 1}


def test_tool_failures_reach_the_model_as_errors_and_are_counted(mocked_aws):
    from scripts.local_stack.emf import capture_emf

    fake = _FakeLambda(({"errorMessage": "boom", "errorType": "RuntimeError"}, "Unhandled"))
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Falhou, desculpe."))
    orch, _ = build(model, mocked_aws["ledger"], LambdaInvoker(fake, {n: s.function_name for n, s in TOOLS.items()}))
    with capture_emf() as emf:
        orch.handle(_turn("conv-err"), Deadline.after(60))
    (result,) = model.tool_results(1)
    assert result["is_error"] is True and json.loads(result["content"])["erro"] == "erro_da_funcao"
    assert emf.totals()[("ErrosDeFerramenta", (("Ferramenta", "consultar_status_pedido"),))] == 1


def test_aws_mode_does_not_import_tool_code():
    """The orchestrator's AWS path never imports a tool package."""
    import subprocess
    import sys

    code = (
        "import sys, orchestrator.handler, orchestrator.invokers.aws, orchestrator.loop;"
        "bad=[m for m in sys.modules if m.split('.')[0] in "
        "('emitir_reembolso','consultar_status_pedido','atualizar_cadastro','orchestrator.invokers.local')"
        " or m == 'orchestrator.invokers.local'];"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": ".:functions", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_state_and_answered_message_commit_together_or_not_at_all(mocked_aws):
    """A failure of the final write leaves neither the new state nor a 'done'
    message behind: the redelivery runs the turn once, as if it were the first."""
    from botocore.exceptions import ClientError as _ClientError

    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Consultei aqui."),
                          tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Consultei aqui."))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker)
    message = _turn("conv-atomica", "cadê meu pedido?")
    real = ledger.client.update_item

    def commit_throttled(**kw):  # the commit (the one write that marks the message answered) fails
        if "respondidas = " in kw["UpdateExpression"]:
            raise _ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                               "UpdateItem")
        return real(**kw)

    ledger.client.update_item = commit_throttled
    try:
        with pytest.raises(_ClientError):
            orch.handle(message, Deadline.after(60))
    finally:
        ledger.client.update_item = real
    assert ledger.read_conversation("conv-atomica").messages == []  # nothing half-written
    again = orch.handle(message, Deadline.after(60))
    assert again.resposta == "Consultei aqui." and again.duplicada is False
    texts = [b["text"] for m in ledger.read_conversation("conv-atomica").messages for b in m["content"]
             if b.get("type") == "text" and m["role"] == "user"]
    assert texts == ["cadê meu pedido?"]
    assert orch.handle(message, Deadline.after(60)).duplicada is True


def test_a_late_invocation_cannot_answer_a_message_taken_over_by_another(mocked_aws):
    """The message's owner changed (our lease expired and a redelivery took it: the
    lease is the message's claim): our commit is cancelled as a whole."""
    ledger = mocked_aws["ledger"]

    def steal(_payload):
        mocked_aws["dynamodb"].update_item(
            TableName="cadencia-agente-execucoes", Key={"pk": {"S": "conversa#conv-roubada"}},
            UpdateExpression="SET dono = :o", ExpressionAttributeValues={":o": {"S": "outra-invocacao"}})
        return text_reply("tarde demais")

    orch, _ = build(ScriptedModel(steal), ledger, CountingInvoker())
    with pytest.raises(ConcurrentCommitError):
        orch.handle(_turn("conv-roubada", mensagem_id="m-1"), Deadline.after(60))
    assert ledger.read_conversation("conv-roubada").messages == []


def test_no_time_left_for_a_tool_ends_the_turn_without_a_handoff(mocked_aws):
    from orchestrator import texts as customer_texts

    model = ScriptedModel(default=lambda _: tool_use("consultar_status_pedido", {"pedidoId": "4821"}))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    # 7 s - 3 s reserve: a model call (2 s minimum) fits, the status tool's 5 s budget does not.
    reply = orch.handle(_turn("conv-pressa"), Deadline.after(7))
    assert (reply.resposta, reply.status, reply.motivo) == (customer_texts.OUT_OF_TIME, "ativa", "sem_tempo")
    assert len(model.requests) == 1 and sum(invoker.calls.values()) == 0
    assert [a for a in mocked_aws["ledger"].history("conv-pressa") if a.get("tipo") == "tentativa"] == []

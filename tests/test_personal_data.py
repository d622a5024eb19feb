"""Personal data (a customer's e-mail, phone, address) and the model API key never
reach a log line, even with every logger at DEBUG: the anthropic SDK and its HTTP
stack (httpx2/httpcore2 for anthropic 2.x) print whole request bodies at DEBUG."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

from cadencia_shared.catalog import TOOLS
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, final_answer, tool_use
from .support.orchestrators import build

ROOT = Path(__file__).resolve().parents[1]
EMAIL = "joana.pessoal@example.org"
PHONE = "+5521998765432"
ADDRESS = "Avenida Atlântica, 1702, apto 501, Rio de Janeiro - RJ"
API_KEY = "sk-ant-test-key"  # what ScriptedModel.sdk() authenticates with
SDK_LOGGERS = ("anthropic", "anthropic._base_client", "httpx2", "httpcore2", "httpcore2.http11")


def test_a_real_turn_at_debug_logs_no_personal_data(tools, mocked_aws, erp, capfd, caplog):
    # As in Lambda: the root logger prints every record to the process's own fds.
    caplog.set_level(logging.DEBUG)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(to_stderr)
    try:
        invoker = InProcessInvoker({name: tools.environment(spec) for name, spec in TOOLS.items()})
        model = ScriptedModel(
            tool_use("atualizar_cadastro", {"campos": {"email": EMAIL, "telefone": PHONE, "endereco": ADDRESS}}),
            final_answer("Obrigado por avisar!", declaracoes=[{"tipo": "cadastro_atualizado", "campo": f}
                                                           for f in ("email", "telefone", "endereco")]),
        )
        orch, _ = build(model, mocked_aws["ledger"], invoker)
        message = f"Meu novo e-mail é {EMAIL}, telefone {PHONE}, endereço {ADDRESS}."
        reply = orch.handle(TurnRequest(conversaId=f"conv-pii-{uuid.uuid4().hex[:6]}", clienteId=1001,
                                        mensagemId="wamid.pii", mensagem=message), Deadline.after(60))
    finally:
        logging.getLogger().removeHandler(to_stderr)

    assert reply.resposta == ("Obrigado por avisar!\n\nSeu e-mail foi atualizado no cadastro.\n"
                              "Seu telefone foi atualizado no cadastro.\nSeu endereço foi atualizado no cadastro.")
    # The turn was real: the ERP row changed and the model was sent the data.
    assert erp.execute("SELECT email, telefone, endereco FROM clientes WHERE id = 1001").fetchone() == (
        EMAIL, PHONE, ADDRESS)
    assert EMAIL in str(model.requests[0]["messages"])
    out, err = capfd.readouterr()
    logged = "\n".join([out, err, caplog.text])
    assert "HTTP Request: POST" in logged  # the SDK's HTTP stack did log (at INFO)
    assert "tool answered" in caplog.text  # and so did the tool, through Powertools
    leaked = [name for name, value in {"e-mail": EMAIL, "phone": PHONE, "address": ADDRESS, "API key": API_KEY,
                                       "address (JSON-escaped)": ADDRESS.replace("â", "\\u00e2")}.items()
              if value in logged]
    assert leaked == []


def test_sdk_loggers_stay_capped_even_when_anthropic_log_asks_for_debug():
    """``ANTHROPIC_LOG=debug`` makes anthropic lower its loggers when it is imported;
    the orchestrator caps them again after that import (fresh interpreter)."""
    code = ("import logging, orchestrator.handler; "
            f"print([logging.getLogger(n).getEffectiveLevel() for n in {SDK_LOGGERS!r}])")
    env = {**os.environ, "ANTHROPIC_LOG": "debug", "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == str([logging.INFO] * len(SDK_LOGGERS))

"""A model that cannot be reached or refuses the credentials is loud, never a quiet table of zeros.

``scripts/provocar_laco.py`` exits non-zero and names the cause (the SDK's error class); the chat
(``scripts/conversa.py``) shows the error's class beside the customer's apology. The model is the real
anthropic SDK against loopback: a port that refuses connections (a bound socket that never listens)
and a small Messages-API server answering 401, or answering once and then 401.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = "claude-sonnet-4-5"
UNAUTHORIZED = (401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
HELLO = (200, {"id": "msg_1", "type": "message", "role": "assistant", "model": CLAUDE,
               "content": [{"type": "text", "text": "Olá! Como posso ajudar?"}], "stop_reason": "end_turn",
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}})
SCENARIO = {"conversaId": "conv-ruidoso", "clienteId": 5301, "pedidoId": "7301", "valorPedido": 50.0,
            "mensagens": ["Quero o reembolso do pedido 7301.", "Já caiu?"]}


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A loopback port nothing listens on (bound, so no one else takes it): connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


class MessagesServer:
    """``POST /v1/messages`` answering from a list (the last answer repeats)."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        self.answers = answers
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, body = outer.answers[min(outer.requests, len(outer.answers) - 1)]
                outer.requests += 1
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def __enter__(self) -> MessagesServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AWS_"))}
    env.update({"COLUMNS": "200", **extra})
    return env


def _provoke(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    scenario = tmp_path / "cenario.jsonl"
    scenario.write_text(json.dumps(SCENARIO) + "\n")
    return subprocess.run(["./scripts/provocar_laco.py", "--arquitetura", "producao", "--cenario", str(scenario),
                           "--saida", str(tmp_path / "resultado.json"), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_an_unreachable_model_fails_the_run_with_its_cause(tmp_path, refusing_url):
    proc = _provoke(tmp_path, "--modelo", CLAUDE,
                    env=_environment(ANTHROPIC_API_KEY="sk-test-not-a-key", ANTHROPIC_BASE_URL=refusing_url))
    output = proc.stdout + proc.stderr
    assert proc.returncode not in (0, 3), output[-3000:]
    assert "APIConnectionError" in output, output[-3000:]
    assert "sk-test-not-a-key" not in output
    assert not (tmp_path / "resultado.json").exists(), "no figures are written for a model that never answered"


def test_a_model_that_refuses_the_key_fails_the_run_with_its_cause(tmp_path):
    with MessagesServer([UNAUTHORIZED]) as server:
        proc = _provoke(tmp_path, "--modelo", CLAUDE,
                        env=_environment(ANTHROPIC_API_KEY="sk-test-not-a-key", ANTHROPIC_BASE_URL=server.url))
    output = proc.stdout + proc.stderr
    assert proc.returncode not in (0, 3), output[-3000:]
    assert "AuthenticationError" in output and "401" in output, output[-3000:]
    assert "sk-test-not-a-key" not in output


def test_bedrock_without_credentials_fails_the_run_with_its_cause(tmp_path):
    env = _environment(AWS_REGION="us-east-1", AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
                       AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    proc = _provoke(tmp_path, "--provedor", "bedrock", "--modelo", "anthropic.claude-sonnet-4-5", env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode not in (0, 3), output[-3000:]
    assert "credentials" in output.lower(), output[-3000:]


@pytest.mark.stack
def test_a_model_that_fails_during_the_run_fails_it(tmp_path, local_stack):
    """It answers the first call, then refuses the key: the turns it could not answer end the run non-zero."""
    with MessagesServer([HELLO, UNAUTHORIZED]) as server:
        proc = _provoke(tmp_path, "--modelo", CLAUDE,
                        env=_environment(ANTHROPIC_API_KEY="sk-test-not-a-key", ANTHROPIC_BASE_URL=server.url))
    output = proc.stdout + proc.stderr
    assert server.requests >= 2
    assert proc.returncode not in (0, 3), output[-3000:]
    assert "AuthenticationError" in output, output[-3000:]


def _chat(url: str) -> str:
    proc = subprocess.run(["./scripts/conversa.py", "--numero", "5541991234567", "--modelo", CLAUDE],
                          input="oi\n/sair\n", cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=_environment(ANTHROPIC_API_KEY="sk-test-not-a-key", ANTHROPIC_BASE_URL=url,
                                           CADENCIA_LOCAL_STACK_DIR=os.environ["CADENCIA_LOCAL_STACK_DIR"]))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "sk-test-not-a-key" not in proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.stack
def test_the_chat_shows_the_class_of_a_connection_error(local_stack, refusing_url):
    out = _chat(refusing_url)
    assert "erro do modelo: APIConnectionError" in out, out[-3000:]


@pytest.mark.stack
def test_the_chat_shows_the_class_of_an_authentication_error(local_stack):
    with MessagesServer([UNAUTHORIZED]) as server:
        out = _chat(server.url)
    assert "erro do modelo: AuthenticationError" in out, out[-3000:]

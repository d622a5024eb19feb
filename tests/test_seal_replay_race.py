"""Two OS processes verify the same sealed envelope at the same moment against one
DynamoDB (a moto server): the jti's conditional PutItem lets exactly one through."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from cadencia_shared.ledger import Ledger, table_definition
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore
from cadencia_shared.seal import seal

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time
from pathlib import Path
import boto3
from cadencia_shared.ledger import Ledger
from cadencia_shared.seal import Verifier
from cadencia_shared.seal_approvals import ledger_approvals
endpoint, event_file, go = sys.argv[1:4]
ledger = Ledger("cadencia-agente-execucoes", boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint))
verifier = Verifier(ledger.table, ledger_approvals(ledger))
event = json.loads(Path(event_file).read_text())
while not Path(go).exists():
    time.sleep(0.001)
refusal = verifier.verify("emitir_reembolso", event)
print("autorizado" if refusal is None else int(refusal.code))
"""


@pytest.fixture
def moto_endpoint(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_two_processes_replaying_one_envelope_authorize_exactly_one_call(moto_endpoint, tmp_path):
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=moto_endpoint)
    client.create_table(**table_definition("cadencia-agente-execucoes"))
    ledger = Ledger("cadencia-agente-execucoes", client)
    session = SessionStore(ledger.table).open_session(
        conversation_id="conv-corrida", customer_id=1001, tools={"emitir_reembolso"}, limits=SessionLimits(),
        expires_at_ms=ledger.now_ms() + 600_000)
    event = seal({"pedidoId": "4821", "valor": 120.0, "conversaId": "conv-corrida", "clienteId": 1001},
                 tool="emitir_reembolso", session=session, now_ms=ledger.now_ms())
    event_file, go = tmp_path / "evento.json", tmp_path / "go"
    event_file.write_text(json.dumps(event))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, moto_endpoint, str(event_file), str(go)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    time.sleep(3)  # both children import and wait for the start signal (not a timing assertion)
    go.touch()
    results = sorted(child.communicate(timeout=120)[0].strip() for child in children)
    assert results == ["1006", "autorizado"]

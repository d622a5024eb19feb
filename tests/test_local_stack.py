"""The local stack's command starts, serves and stops cleanly (no process, no port left)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import psycopg
import pytest

from scripts.local_stack import postgres, stack

ROOT = Path(__file__).resolve().parents[1]
# Starts its own stack in a child process (not through the local_stack fixture).
pytestmark = pytest.mark.stack


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scripts.local_stack", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_up_status_down_leaves_nothing_behind(tmp_path):
    env = {**os.environ, "CADENCIA_LOCAL_STACK_DIR": str(tmp_path), "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"}
    env.pop("CADENCIA_PG_DSN", None)
    up = _cli(["up"], env)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "applying sql/schema.sql" in up.stdout  # progress is shown
    state = json.loads((tmp_path / "state.json").read_text())
    api = json.loads((tmp_path / "api.json").read_text())  # the operators' API and its OpenID issuer
    try:
        assert api["api"] in up.stdout and api["emissor"] in up.stdout
        assert "ana" in up.stdout and "aprovadores" in up.stdout and "atendentes" in up.stdout  # the demo users
        with urllib.request.urlopen(f"{api['emissor']}/jwks.json", timeout=10) as resp:
            assert json.load(resp)["keys"][0]["alg"] == "RS256"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{api['api']}/aprovacoes", timeout=10)
        assert refused.value.code == 401
        status = _cli(["status"], env)
        assert status.returncode == 0, status.stdout
        # It serves: the ledger table, the secret, the gateway, PostgreSQL with demo data.
        session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                        region_name="us-east-1")
        ddb = session.client("dynamodb", endpoint_url=state["aws_endpoint"])
        assert "cadencia-agente-execucoes" in ddb.list_tables()["TableNames"]
        ttl = ddb.describe_time_to_live(TableName="cadencia-agente-execucoes")["TimeToLiveDescription"]
        assert ttl["AttributeName"] == "expiraEm"
        sm = session.client("secretsmanager", endpoint_url=state["aws_endpoint"])
        assert json.loads(sm.get_secret_value(SecretId="cadencia/gateway-pagamento")["SecretString"]) == {
            "token": state["gateway_token"]}
        pg = state["postgres"]
        with psycopg.connect(host=pg["host"], port=pg["port"], dbname=pg["dbname"], user="cadencia_agente_consulta",
                             password=pg["users"]["cadencia_agente_consulta"]) as conn:
            assert conn.execute("SELECT count(*) FROM pedidos").fetchone()[0] == 4
        again = _cli(["up"], env)  # idempotent: reuses the healthy stack
        assert "already running" in again.stdout
        assert json.loads((tmp_path / "state.json").read_text())["server_pid"] == state["server_pid"]
    finally:
        down = _cli(["down"], env)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped cleanly" in down.stdout
    ports = [int(state["aws_endpoint"].rsplit(":", 1)[1]), int(state["gateway_url"].rsplit(":", 1)[1]),
             state["postgres"]["port"], int(api["api"].rsplit(":", 1)[1]), int(api["emissor"].rsplit(":", 1)[1])]
    assert [p for p in ports if _port_open(p)] == []
    assert not Path(state["postgres"]["data_dir"]).exists()
    assert not stack._alive(state["server_pid"])  # gone (or an exited zombie awaiting its reaper)
    assert not stack._alive(api["pid"]) and not (tmp_path / "api.json").exists()
    assert _cli(["status"], env).returncode == 3  # down


def test_existing_server_named_by_dsn_is_used(local_stack, tmp_path):
    """CADENCIA_PG_DSN: the stack applies the SQL to that server instead of starting one."""
    pg = local_stack.postgres
    with psycopg.connect(pg.admin_conninfo(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS cadencia_externo")
        conn.execute("CREATE DATABASE cadencia_externo")
    dsn = f"host=127.0.0.1 port={pg.port} dbname=cadencia_externo user={pg.admin_user} password={pg.admin_password}"
    env = {**os.environ, "CADENCIA_LOCAL_STACK_DIR": str(tmp_path), "CADENCIA_PG_DSN": dsn,
           "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"}
    try:
        up = _cli(["up"], env)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "CADENCIA_PG_DSN" in up.stdout
        state = json.loads((tmp_path / "state.json").read_text())
        assert state["postgres"]["data_dir"] is None and state["postgres"]["port"] == pg.port
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM pedidos").fetchone()[0] == 4
    finally:
        assert _cli(["down"], env).returncode == 0
    assert _port_open(pg.port)  # an external server is left running
    with psycopg.connect(pg.admin_conninfo(), autocommit=True) as conn:
        conn.execute("DROP DATABASE cadencia_externo")
    # The tools' users are the cluster's: that stack set its own passwords for them. Give the
    # shared stack's back, or every later process that logs in as a tool user is refused.
    postgres.apply_sql(pg)

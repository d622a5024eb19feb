"""Bring the local stack up, describe it, and take it down without leftovers.

Processes: one background "stack server" (moto, serialized, and the payment
gateway, on two free loopback ports) and one PostgreSQL cluster. Their addresses,
pids and the local credentials are kept in ``.local-stack/state.json``; ``down``
stops both and checks that neither port still answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cadencia_shared.audit_chain import AUDIT_TABLE
from cadencia_shared.catalog import (
    EMITIR_REEMBOLSO,
    GATEWAY_SECRET_NAME,
    LEDGER_TABLE,
    RECONCILER_DB_USER,
    TOOLS,
    ToolSpec,
)

from . import postgres
from .aws import LOCAL_CREDENTIALS, REGION, provision
from .layer_guard import refuse_when_forbidden

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / ".local-stack"

Progress = Callable[[str], None]
API_READY_FILE = "api.json"  # written by the operators' API process (console_api) when it serves


def state_dir() -> Path:
    return Path(os.environ.get("CADENCIA_LOCAL_STACK_DIR", DEFAULT_DIR))


@dataclass
class StackState:
    aws_endpoint: str
    gateway_url: str
    gateway_token: str
    server_pid: int
    postgres: postgres.PostgresInfo
    directory: str
    ledger_table: str = LEDGER_TABLE
    secret_name: str = GATEWAY_SECRET_NAME

    # -- what callers need -------------------------------------------------------
    @property
    def metrics_file(self) -> Path:
        return Path(self.directory) / "metrics.jsonl"

    @property
    def debits_file(self) -> Path:
        return Path(self.directory) / "gateway-debitos.jsonl"

    def aws_environment(self) -> dict[str, str]:
        """Environment for any boto3 client that should talk to the local AWS."""
        return {**LOCAL_CREDENTIALS, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                "AWS_ENDPOINT_URL": self.aws_endpoint}

    def function_environment(self, tool: ToolSpec) -> dict[str, str]:
        """The environment a tool Lambda gets (the CDK stack sets the AWS equivalent)."""
        env = {
            **self.aws_environment(),
            "LEDGER_TABLE": self.ledger_table,
            "DB_HOST": self.postgres.host,
            "DB_PORT": str(self.postgres.port),
            "DB_NAME": self.postgres.dbname,
            "DB_USER": tool.db_user,
            "DB_AUTH": "password",
            "DB_PASSWORD": self.postgres.users[tool.db_user],
        }
        if tool is EMITIR_REEMBOLSO:
            env.update(GATEWAY_URL=self.gateway_url, GATEWAY_SECRET_NAME=self.secret_name)
        if tool.appends_audit:
            env["AUDIT_TABLE"] = AUDIT_TABLE  # the hash chain (provisioned beside the ledger)
        return env

    def reconciler_environment(self) -> dict[str, str]:
        """The reconciler Lambda's environment: the refund's, as its own DB user."""
        env = self.function_environment(EMITIR_REEMBOLSO)
        env.update(DB_USER=RECONCILER_DB_USER, DB_PASSWORD=self.postgres.users[RECONCILER_DB_USER],
                   GATEWAY_LISTS_DEBITS="true")  # the local gateway lists its debits (GET /v1/debitos)
        return env

    def function_environments(self) -> dict[str, dict[str, str]]:
        return {spec.name: self.function_environment(spec) for spec in TOOLS.values()}

    def to_json(self) -> dict[str, Any]:
        return {
            "aws_endpoint": self.aws_endpoint, "gateway_url": self.gateway_url,
            "gateway_token": self.gateway_token, "server_pid": self.server_pid,
            "postgres": self.postgres.to_dict(), "directory": self.directory,
            "ledger_table": self.ledger_table, "secret_name": self.secret_name,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StackState:
        return cls(**{**data, "postgres": postgres.PostgresInfo(**data["postgres"])})


def load() -> StackState | None:
    path = state_dir() / "state.json"
    if not path.exists():
        return None
    refuse_when_forbidden("local stack used")  # finding none is allowed in any test layer
    return StackState.from_json(json.loads(path.read_text()))


def _port_open(url_or_port: str | int) -> bool:
    port = url_or_port if isinstance(url_or_port, int) else int(str(url_or_port).rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    """Running (a zombie, exited but not yet reaped by its parent, is not)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def healthy(state: StackState) -> dict[str, bool]:
    import psycopg

    checks = {"servidor": _alive(state.server_pid), "aws": _port_open(state.aws_endpoint),
              "gateway": _port_open(state.gateway_url)}
    try:
        with psycopg.connect(state.postgres.admin_conninfo()) as conn:
            conn.execute("SELECT 1")
        checks["postgres"] = True
    except psycopg.Error:
        checks["postgres"] = False
    return checks


def _quiet(_: str) -> None:
    pass


def up(progress: Progress = _quiet) -> StackState:
    """Start everything (or return the running stack when it is healthy)."""
    refuse_when_forbidden("local stack start")
    current = load()
    if current is not None:
        if all(healthy(current).values()):
            progress("local stack already running")
            return current
        progress("previous local stack is unhealthy: cleaning it up")
        down(progress)

    directory = state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    ready_file = directory / "server.json"
    ready_file.unlink(missing_ok=True)
    for stale in ("metrics.jsonl", "gateway-debitos.jsonl"):
        (directory / stale).unlink(missing_ok=True)

    progress("starting moto (serialized) and the payment gateway on loopback")
    log = (directory / "server.log").open("w")
    env = {**os.environ, "CADENCIA_GATEWAY_TOKEN": token, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'functions'}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.local_stack", "serve", "--ready-file", str(ready_file),
         "--debits-file", str(directory / "gateway-debitos.jsonl")],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    pg: postgres.PostgresInfo | None = None
    try:
        aws_endpoint, gateway_url = _await_server(proc, ready_file, directory)
        progress("creating the ledger table and the gateway secret")
        provision(aws_endpoint, table_name=LEDGER_TABLE, secret_name=GATEWAY_SECRET_NAME, gateway_token=token)
        pg = _start_postgres(progress)
        progress("applying sql/schema.sql, sql/grants.sql, sql/demo.sql")
        postgres.apply_sql(pg)
    except BaseException:  # a failure or a Ctrl-C half-way: state.json is not written yet, so
        _stop_server(proc.pid)  # `down` could not find what was started here
        if pg is not None:
            postgres.stop_cluster(pg)
        raise

    state = StackState(aws_endpoint=aws_endpoint, gateway_url=gateway_url, gateway_token=token,
                       server_pid=proc.pid, postgres=pg, directory=str(directory))
    (directory / "state.json").write_text(json.dumps(state.to_json(), indent=2))
    os.chmod(directory / "state.json", 0o600)  # holds local passwords
    progress(f"ready: aws {aws_endpoint}, gateway {gateway_url}, postgres 127.0.0.1:{pg.port}")
    return state


def _await_server(proc: subprocess.Popen, ready_file: Path, directory: Path) -> tuple[str, str]:
    deadline = time.monotonic() + 30
    while not ready_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"stack server did not start; see {directory / 'server.log'}")
        time.sleep(0.05)
    ports = json.loads(ready_file.read_text())
    return f"http://127.0.0.1:{ports['aws']}", f"http://127.0.0.1:{ports['gateway']}"


def _start_postgres(progress: Progress) -> postgres.PostgresInfo:
    dsn = os.environ.get("CADENCIA_PG_DSN")
    if dsn:
        progress("using the PostgreSQL server named by CADENCIA_PG_DSN")
        return postgres.external_from_dsn(dsn)
    progress("starting a throwaway PostgreSQL cluster on loopback")
    return postgres.start_cluster()


def _stop_server(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)


def _api_pid(directory: Path) -> int | None:
    """The operators' API process (console_api.start), which every way down must stop."""
    try:
        return int(json.loads((directory / API_READY_FILE).read_text())["pid"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def down(progress: Progress = _quiet) -> list[str]:
    """Stop everything; returns what is still left behind (empty when clean)."""
    state = load()
    if state is None:
        progress("no local stack to stop")
        return []
    api_pid = _api_pid(Path(state.directory))
    if api_pid is not None:
        progress("stopping the operators' API")
        _stop_server(api_pid)
    progress("stopping the stack server (moto, gateway)")
    _stop_server(state.server_pid)
    progress("stopping PostgreSQL and removing its data directory")
    postgres.stop_cluster(state.postgres)
    leftovers = []
    for pid in (state.server_pid, api_pid):
        if pid is not None and _alive(pid):
            leftovers.append(f"process {pid}")
    for name, where in (("aws", state.aws_endpoint), ("gateway", state.gateway_url)):
        if _port_open(where):
            leftovers.append(f"{name} port still open: {where}")
    if not state.postgres.external and _port_open(state.postgres.port):
        leftovers.append(f"postgres port still open: {state.postgres.port}")
    (Path(state.directory) / "state.json").unlink(missing_ok=True)
    (Path(state.directory) / "server.json").unlink(missing_ok=True)
    (Path(state.directory) / API_READY_FILE).unlink(missing_ok=True)
    progress("stopped cleanly" if not leftovers else f"left behind: {leftovers}")
    return leftovers


def serve(ready_file: Path, debits_file: Path) -> None:
    """Body of the background stack server: moto + gateway until SIGTERM."""
    import threading

    from .aws import make_moto_server
    from .gateway_server import GatewayState, make_server

    moto = make_moto_server()
    gateway = make_server("127.0.0.1", 0, GatewayState(token=os.environ["CADENCIA_GATEWAY_TOKEN"],
                                                       debits_file=debits_file))
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (moto, gateway)]
    for t in threads:
        t.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tmp = ready_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"aws": moto.server_port, "gateway": gateway.server_address[1]}))
    tmp.rename(ready_file)
    stop.wait()
    gateway.shutdown()
    moto.shutdown()
    gateway.server_close()
    moto.server_close()

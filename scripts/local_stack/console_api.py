"""The operators' API on the local stack: the OpenID issuer and the API adapter, with
the deployed functions' handlers behind it, in-process.

``./scripts/local-stack up`` starts them in a background process (``api`` command,
pid and addresses in ``api.json`` of the stack's directory) and prints the API's
address and the demo users; ``down`` stops it. Tests call ``serve`` in-process.

The decision function resumes nothing itself on the local stack (``RESUME_FUNCTION``
empty): after a decision, this wiring resumes the conversation in-process, as the
deployed orchestrator does when the decision function invokes it asynchronously.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cadencia_shared.catalog import DECISION_FUNCTION_NAME
from canal_whatsapp.settings import HUMAN_REPLY_FUNCTION_NAME
from orchestrator.api_routes import LOCAL_AUDIENCE

from . import api_adapter, jwt_rs256, oidc_issuer, stack

API_FILE = stack.API_READY_FILE
KEY_FILE = "oidc-chave.pem"


@dataclass
class ConsoleApi:
    issuer: oidc_issuer.Issuer
    issuer_server: ThreadingHTTPServer
    api_server: ThreadingHTTPServer
    # Each resume this wiring ran (orchestrator.resume.Resumed: what the customer was told).
    resumed: list[Any]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_server.server_address[1]}"

    def close(self) -> None:
        for server in (self.api_server, self.issuer_server):
            server.shutdown()
            server.server_close()


def _decision(state: stack.StackState, extra_env: dict[str, str], resumed: list[Any]) -> api_adapter.Function:
    def call(event: dict[str, Any]) -> dict[str, Any]:
        from orchestrator.invokers.local import InProcessInvoker, LocalContext, function_environment
        from orchestrator.model import Deadline
        from orchestrator.resume import Resumer
        from orchestrator.settings import OrchestratorSettings

        from ..aprovar import local_environment
        from ..operator_cli import chained_ledger
        from .aws import session_client

        env = {**local_environment(state), **extra_env}
        with function_environment(env):
            from decidir_aprovacao.handler import lambda_handler

            answer = lambda_handler(event, LocalContext(DECISION_FUNCTION_NAME))
        to_resume = _to_resume(event, answer) or _page_to_resume(state, event, answer)
        if to_resume:
            settings = OrchestratorSettings.from_env({**env, "TOOL_INVOKER": "local",
                                                      "LEDGER_TABLE": state.ledger_table})
            ledger = chained_ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
            resumed.append(Resumer.build(settings, ledger, InProcessInvoker(state.function_environments())).resume(
                to_resume, Deadline.after(60)))
        return answer
    return call


def _to_resume(event: dict[str, Any], answer: dict[str, Any]) -> str | None:
    """What the deployed decision function hands to the orchestrator's resume."""
    if (event.get("requestContext", {}).get("http", {}).get("method") != "POST"
            or str(event.get("rawPath", "")).startswith("/console/")):
        return None  # a page's HTML answer: _page_to_resume
    body = json.loads(answer.get("body") or "{}")
    if body.get("ok") and body.get("resultado") in ("aprovada", "negada"):
        return body["aprovacao"]["aprovacaoId"]
    if (body.get("erro") or {}).get("codigo") == "aprovacao_expirada":
        return (event.get("pathParameters") or {}).get("aprovacaoId")
    return None


def _page_to_resume(state: stack.StackState, event: dict[str, Any], answer: dict[str, Any]) -> str | None:
    """The same for a console page's decision (an HTML answer): the request the page
    decided (its redirect's) when the ledger shows it aprovada or negada, or the path's
    when it is still pending past its expiry (a late decision unsticks it)."""
    if not str(event.get("routeKey", "")).startswith("POST /console/aprovacoes/"):
        return None
    from cadencia_shared.approvals import ApprovalStore
    from cadencia_shared.ledger import Ledger

    from .aws import session_client

    location = (answer.get("headers") or {}).get("Location", "").split("?", 1)[0]
    approval = location.rsplit("/", 1)[-1] if location else (event.get("pathParameters") or {}).get("aprovacaoId")
    ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint))
    record = ApprovalStore(ledger).get(approval or "")
    if record is None:
        return None
    if location:
        return record.id if record.status.value in ("aprovada", "negada") else None
    return record.id if record.status.value == "pendente" and record.expired(ledger.now_ms()) else None


def _reply(state: stack.StackState) -> api_adapter.Function:
    def call(event: dict[str, Any]) -> dict[str, Any]:
        from orchestrator import human_reply_handler
        from orchestrator.invokers.local import LocalContext, function_environment

        from ..operator_cli import audit_table
        from .whatsapp_channel import published_sender_environment

        channel = published_sender_environment(Path(state.directory)) or {}
        env = {**state.aws_environment(), "LEDGER_TABLE": state.ledger_table, "AUDIT_TABLE": audit_table(),
               "POWERTOOLS_LOG_LEVEL": "WARNING", **channel}
        with function_environment(env):
            human_reply_handler.reset()
            try:
                return human_reply_handler.lambda_handler(event, LocalContext(HUMAN_REPLY_FUNCTION_NAME,
                                                                              timeout_s=30))
            finally:
                human_reply_handler.reset()
    return call


def serve(state: stack.StackState, *, now: Callable[[], float] = time.time, extra_env: dict[str, str] | None = None,
          users: Path = oidc_issuer.DEMO_USERS, key_file: Path | None = None) -> ConsoleApi:
    """The issuer and the adapter on loopback ports, in this process."""
    key_path = key_file or Path(state.directory) / KEY_FILE
    if key_path.exists():
        key = jwt_rs256.load_pem(key_path.read_bytes())
    else:
        key = jwt_rs256.new_key()
        key_path.touch(mode=0o600)
        key_path.write_bytes(jwt_rs256.pem(key))
    issuer = oidc_issuer.Issuer(key=key, users=oidc_issuer.load_users(users), audience=LOCAL_AUDIENCE, now=now)
    issuer_server = oidc_issuer.serve(issuer)
    # The console's sign-in page exchanges a demo login and password at the issuer.
    extra_env = {"CONSOLE_TOKEN_URL": f"{issuer.url}/token", "CONSOLE_CLIENT_ID": LOCAL_AUDIENCE,
                 **(extra_env or {})}
    authorizer = api_adapter.Authorizer(issuer=issuer.url, audiences=frozenset({LOCAL_AUDIENCE}), now=now)
    resumed: list[Any] = []
    functions = {DECISION_FUNCTION_NAME: _decision(state, extra_env, resumed),
                 HUMAN_REPLY_FUNCTION_NAME: _reply(state)}
    return ConsoleApi(issuer, issuer_server, api_adapter.serve(authorizer, functions), resumed)


def run_foreground(ready_file: Path) -> None:
    """Body of the background ``api`` process: serve until SIGTERM."""
    state = stack.load()
    if state is None:
        raise SystemExit("local stack is down")
    api = serve(state)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tmp = ready_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"api": api.url, "emissor": api.issuer.url, "pid": os.getpid()}))
    tmp.rename(ready_file)
    stop.wait()
    api.close()


def start(state: stack.StackState) -> dict[str, Any]:
    """Start the background ``api`` process (or return the running one's addresses)."""
    ready = Path(state.directory) / API_FILE
    if ready.exists():
        info = json.loads(ready.read_text())
        if stack._alive(info["pid"]):
            return info
        ready.unlink()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'functions'}"}
    log = (Path(state.directory) / "api.log").open("w")
    subprocess.Popen([sys.executable, "-m", "scripts.local_stack", "api", "--ready-file", str(ready)], cwd=root,
                     env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the API did not start: see {Path(state.directory) / 'api.log'}")
        time.sleep(0.1)
    return json.loads(ready.read_text())


def stop(directory: Path) -> None:
    ready = directory / API_FILE
    if ready.exists():
        stack._stop_server(json.loads(ready.read_text())["pid"])
        ready.unlink(missing_ok=True)


def demo_users() -> list[tuple[str, str, str]]:
    return [(u.login, u.password, ", ".join(u.groups)) for u in oidc_issuer.load_users().values()]

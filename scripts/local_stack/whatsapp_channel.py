"""The WhatsApp channel on the local stack, each piece in its own OS process:

    fake Cloud API ──signed webhook──► ingress (loopback HTTP → the Lambda handler,
    (this process)                      as a Function URL event) ──► SQS FIFO (moto)
          ▲                                                               │
          └──── POST /{phone-number-id}/messages ◄── consumer worker(s) ◄─┘
                                       (the orchestrator's queue handler, as the
                                        event source mapping calls it)

A worker receives one message at a time (batch size 1, as in the stack), calls
``orchestrator.whatsapp_consumer.lambda_handler`` with an SQS event, deletes the
message when it succeeded and otherwise leaves it to reappear after the queue's
visibility timeout, like Lambda's event source mapping. Queue names are unique
per ``LocalChannel``, so tests on one moto server never see each other's messages.

    python -m scripts.local_stack.whatsapp_channel ingress  --env-file F --port-file P
    python -m scripts.local_stack.whatsapp_channel consumer --env-file F --queue-url U
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cadencia_shared.audit_chain import AUDIT_TABLE
from cadencia_shared.catalog import HANDOFF_BUS_NAME, WHATSAPP_DB_USER
from canal_whatsapp.queue_timing import QueueTiming, queue_timing

from .aws import session_client
from .whatsapp_fake import FakeCloudApi, FakeCloudApiServer, WebhookClient

ROOT = Path(__file__).resolve().parents[2]
# The queue's timing follows the stack's rule (canal_whatsapp.queue_timing), from the
# local turn's timeout and lease: a failed message is made visible again after
# RETRY_AFTER_S instead of waiting out the visibility timeout, for speed, but never
# sooner than the rule allows (a message must not run out of receives while a consumer
# killed mid-turn still holds its conversation).
TURN_TIMEOUT_S = 25
LOCAL_LEASE_S = 30
RETRY_AFTER_S = 1


def local_timing(turn_timeout_s: int = TURN_TIMEOUT_S, lease_s: int = LOCAL_LEASE_S) -> QueueTiming:
    return queue_timing(turn_timeout_s=turn_timeout_s, lease_s=lease_s, redelivery_s=RETRY_AFTER_S)


def consumer_timing_environment(timing: QueueTiming, lease_s: int = LOCAL_LEASE_S,
                                turn_timeout_s: int = TURN_TIMEOUT_S) -> dict[str, str]:
    """What a consumer process needs to keep the rule: its lease, its turn's timeout
    and when a failed record comes back."""
    return {"CONVERSA_LEASE_S": str(lease_s), "LOCAL_TURN_TIMEOUT_S": str(turn_timeout_s),
            "LOCAL_RETRY_AFTER_S": str(timing.redelivery_s)}
# Where a running channel tells the attendant's tooling (scripts/atendente.py) how
# to send through it: the fake's Graph URL and the access token's secret name.
PUBLISHED_FILE = "whatsapp-canal.json"
SENDER_KEYS = ("WHATSAPP_GRAPH_URL", "WHATSAPP_ACCESS_TOKEN_NAME", "WHATSAPP_SEND_TIMEOUT_S",
               "WHATSAPP_BACKOFF_BASE_S", "WHATSAPP_SEND_ATTEMPTS", "WHATSAPP_SEND_LEASE_S")


def published_sender_environment(state_dir: Path) -> dict[str, str] | None:
    """The sender settings of the channel running on this local stack (None: none is)."""
    path = state_dir / PUBLISHED_FILE
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def provision_queues(sqs: Any, suffix: str, timing: QueueTiming) -> tuple[str, str]:
    dlq = sqs.create_queue(QueueName=f"cadencia-whatsapp-dlq-{suffix}.fifo", Attributes={"FifoQueue": "true"})
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq["QueueUrl"], AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(
        QueueName=f"cadencia-whatsapp-entrada-{suffix}.fifo",
        Attributes={"FifoQueue": "true", "VisibilityTimeout": str(timing.visibility_s),
                    "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                                 "maxReceiveCount": timing.max_receives})},
    )
    return queue["QueueUrl"], dlq["QueueUrl"]


def provision_resend_queue(sqs: Any, suffix: str, timing: QueueTiming) -> str:
    """The resend queue (standard, as infra/channel.py): per-message DelaySeconds."""
    return sqs.create_queue(QueueName=f"cadencia-whatsapp-reenvios-{suffix}",
                            Attributes={"VisibilityTimeout": str(timing.visibility_s)})["QueueUrl"]


def put_secret(sm: Any, name: str, value: str) -> None:
    try:
        sm.create_secret(Name=name, SecretString=value)
    except sm.exceptions.ResourceExistsException:
        sm.put_secret_value(SecretId=name, SecretString=value)


# -- the two server processes ----------------------------------------------------------
def function_url_event(method: str, path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """What a Lambda Function URL passes to the handler (payload format 2.0)."""
    url = urlsplit(path)
    text_body = body.decode("utf-8", errors="strict") if body else ""
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": url.path, "rawQueryString": url.query,
        "headers": {k.lower(): v for k, v in headers.items()},
        "queryStringParameters": dict(parse_qsl(url.query)) or None,
        "requestContext": {"http": {"method": method, "path": url.path, "protocol": "HTTP/1.1",
                                    "sourceIp": "127.0.0.1", "userAgent": headers.get("User-Agent", "")},
                           "requestId": secrets.token_hex(8), "timeEpoch": int(time.time() * 1000)},
        "body": text_body, "isBase64Encoded": False,
    }


def serve_ingress(port_file: Path) -> None:
    from canal_whatsapp.handler import lambda_handler
    from orchestrator.invokers.local import LocalContext

    # This process is one execution environment, and Lambda runs one invocation per
    # environment at a time (concurrent webhooks get environments of their own). The HTTP
    # server's threads must not share the handler's cached clients and DB connection
    # concurrently, which Lambda never does: 8 of 12 concurrent webhooks answered 502 that way.
    one_invocation_at_a_time = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _call(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                event = function_url_event(method, self.path, dict(self.headers), body)
            except UnicodeDecodeError:  # Lambda would base64-encode it; the signature still decides
                event = function_url_event(method, self.path, dict(self.headers), b"")
                import base64
                event.update(body=base64.b64encode(body).decode(), isBase64Encoded=True)
            try:
                with one_invocation_at_a_time:
                    result = lambda_handler(event, LocalContext("cadencia-canal-whatsapp-entrada", timeout_s=10))
                status, raw = int(result["statusCode"]), str(result.get("body", "")).encode()
            except Exception:  # what a Function URL answers when the function fails
                status, raw = 502, b"Internal Server Error"
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:  # noqa: N802
            self._call("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._call("POST")

        def do_PUT(self) -> None:  # noqa: N802 - a Function URL passes every method to the code
            self._call("PUT")

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(http.server_address[1]))
    tmp.rename(port_file)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    http.serve_forever()


# -- the whole channel, for tests, scripts/conversa.py and prova ---------------------------
class LocalChannel:
    def __init__(self, state: Any, *, model_env: dict[str, str], consumers: int = 1,
                 log_level: str = "WARNING", sender_env: dict[str, str] | None = None,
                 turn_timeout_s: int = TURN_TIMEOUT_S, lease_s: int = LOCAL_LEASE_S,
                 visibility_s: int | None = None, publish: bool = False) -> None:
        """``turn_timeout_s`` and ``lease_s`` give the queue's timing (the stack's rule);
        ``visibility_s`` overrides only the visibility timeout, for a test whose message
        never meets a held conversation (a send interrupted after the turn's commit)."""
        self.state = state
        self.model_env = model_env
        self.consumers = consumers
        self.log_level = log_level
        self.sender_env = sender_env or {}
        self.app_secret = secrets.token_hex(16)
        self.verify_token = secrets.token_urlsafe(12)
        self.queue_key = secrets.token_hex(32)  # the ingress's assertion on every queued body
        self.api = FakeCloudApi(access_token=secrets.token_urlsafe(24))
        self._fake = FakeCloudApiServer(self.api)
        self._tmp = tempfile.TemporaryDirectory(prefix="cadencia-whatsapp-")
        self.dir = Path(self._tmp.name)
        self.procs: list[subprocess.Popen[bytes]] = []
        suffix = secrets.token_hex(4)
        self.names = {k: f"cadencia/whatsapp/{k}-{suffix}" for k in ("app-secret", "verify-token", "access-token",
                                                                     "queue-key")}
        self.sqs = session_client("sqs", state.aws_endpoint)
        self.timing = local_timing(turn_timeout_s, lease_s)
        if visibility_s is not None:
            self.timing = dataclasses.replace(self.timing, visibility_s=visibility_s)
        self.timing_env = consumer_timing_environment(self.timing, lease_s, turn_timeout_s)
        self.queue_url, self.dlq_url = provision_queues(self.sqs, suffix, self.timing)
        self.resend_url = provision_resend_queue(self.sqs, suffix, self.timing)
        self.ingress_url = ""
        self.publish = publish
        self._published_before: dict[str, str] | None = None

    # -- environments (the stack sets the AWS equivalents) -------------------------------
    def _common(self) -> dict[str, str]:
        return {**self.state.aws_environment(), "POWERTOOLS_LOG_LEVEL": self.log_level,
                "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'functions'}"}

    def ingress_environment(self) -> dict[str, str]:
        pg = self.state.postgres
        return {**self._common(), "WHATSAPP_QUEUE_URL": self.queue_url,
                "WHATSAPP_APP_SECRET_NAME": self.names["app-secret"],
                "WHATSAPP_VERIFY_TOKEN_NAME": self.names["verify-token"],
                "WHATSAPP_QUEUE_KEY_NAME": self.names["queue-key"],
                "DB_HOST": pg.host, "DB_PORT": str(pg.port), "DB_NAME": pg.dbname, "DB_USER": WHATSAPP_DB_USER,
                "DB_AUTH": "password", "DB_PASSWORD": pg.users[WHATSAPP_DB_USER]}

    def consumer_environment(self) -> dict[str, str]:
        tools = self.dir / "tool-environments.json"
        tools.write_text(json.dumps({n: {**e, "POWERTOOLS_LOG_LEVEL": self.log_level}
                                     for n, e in self.state.function_environments().items()}))
        # AUDIT_TABLE as infra.controls.add_audit_table gives the consumer: its decisions go on the hash chain.
        # EVENT_BUS_NAME as infra.channel gives the consumer: hand-offs reach the local bus and its queue.
        return {**self._common(), **self.model_env, "LEDGER_TABLE": self.state.ledger_table, "AUDIT_TABLE": AUDIT_TABLE,
                "EVENT_BUS_NAME": HANDOFF_BUS_NAME,
                "TOOL_INVOKER": "local", "LOCAL_TOOL_ENVIRONMENTS": str(tools),
                "WHATSAPP_GRAPH_URL": self._fake.graph_url, "WHATSAPP_ACCESS_TOKEN_NAME": self.names["access-token"],
                "WHATSAPP_QUEUE_KEY_NAME": self.names["queue-key"],
                "WHATSAPP_SEND_TIMEOUT_S": "2", "WHATSAPP_BACKOFF_BASE_S": "0.05", **self.timing_env,
                "WHATSAPP_RESEND_QUEUE_URL": self.resend_url, "WHATSAPP_RESEND_BASE_S": "1",
                **self.sender_env}

    def sender_environment(self) -> dict[str, str]:
        """How replies go out through this channel (the consumers and a person's replies)."""
        env = self.consumer_environment()
        return {k: env[k] for k in SENDER_KEYS if k in env}

    def _spawn(self, role: str, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
        env_file = self.dir / f"{role}.env.json"
        env_file.write_text(json.dumps(env))
        os.chmod(env_file, 0o600)  # local passwords
        log = (self.dir / f"{role}-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", "scripts.local_stack.whatsapp_channel", role,
                                 "--env-file", str(env_file), *args], cwd=ROOT,
                                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},  # logs read while it runs
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def start_consumers(self, n: int) -> None:
        env = self.consumer_environment()
        for _ in range(n):
            self._spawn("consumer", env, "--queue-url", self.queue_url, "--resend-queue-url", self.resend_url)

    def stop_consumers(self, timeout_s: float = 300) -> bool:
        """Ask every consumer to stop (SIGTERM: each finishes the message in hand, then
        exits) and wait for them: after it nothing more is sent — a test counts the
        replies then, not after a pause it hopes is long enough. False: one did not exit."""
        consumers = [p for p in self.procs if "consumer" in p.args and p.poll() is None]
        for proc in consumers:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in consumers:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True

    def __enter__(self) -> LocalChannel:
        sm = session_client("secretsmanager", self.state.aws_endpoint)
        for key, value in (("app-secret", self.app_secret), ("verify-token", self.verify_token),
                           ("access-token", self.api.access_token), ("queue-key", self.queue_key)):
            put_secret(sm, self.names[key], value)
        self._fake.__enter__()
        port_file = self.dir / "ingress.port"
        proc = self._spawn("ingress", self.ingress_environment(), "--port-file", str(port_file))
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"the ingress did not start; see {self.dir}")
            time.sleep(0.05)
        self.ingress_url = f"http://127.0.0.1:{port_file.read_text()}/"
        self.start_consumers(self.consumers)
        if self.publish:
            self._published_before = published_sender_environment(Path(self.state.directory))
            self._publish(self.sender_environment())
        return self

    def _publish(self, env: dict[str, str] | None) -> None:
        """Point the attendant's tooling at ``env`` (None: at no channel)."""
        target = Path(self.state.directory) / PUBLISHED_FILE
        if env is None:
            target.unlink(missing_ok=True)
            return
        target.with_suffix(".tmp").write_text(json.dumps(env))
        target.with_suffix(".tmp").rename(target)

    def seal(self, message: Any, issued_at_s: float | None = None) -> str:
        """A ``QueuedMessage`` signed as this channel's ingress signs it (for a test that
        enqueues straight, as a redelivery past SQS's deduplication window would)."""
        from canal_whatsapp import assertion

        return assertion.sign(message.model_dump(mode="json", exclude_none=True), self.queue_key,
                              int(time.time() if issued_at_s is None else issued_at_s))

    @property
    def webhook(self) -> WebhookClient:
        return WebhookClient(self.ingress_url, self.app_secret)

    def wait_for_replies(self, wa_id: str, n: int, timeout_s: float = 60) -> list[Any]:
        deadline = time.monotonic() + timeout_s
        while len(self.api.sent_to(wa_id)) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.api.sent_to(wa_id)

    def queue_depth(self, url: str | None = None) -> int:
        attrs = self.sqs.get_queue_attributes(QueueUrl=url or self.queue_url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        return sum(int(attrs.get(k, 0)) for k in ("ApproximateNumberOfMessages",
                                                  "ApproximateNumberOfMessagesNotVisible",
                                                  "ApproximateNumberOfMessagesDelayed"))

    def wait_until_drained(self, timeout_s: float = 60, url: str | None = None) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.queue_depth(url) == 0:
                return True
            time.sleep(0.1)
        return False

    def stop_process(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __exit__(self, *exc: object) -> None:
        if self.publish:  # a channel published before this one (nested) is pointed at again
            self._publish(self._published_before)
        for proc in self.procs:
            self.stop_process(proc)
        self._fake.__exit__()
        for url in (self.queue_url, self.dlq_url, self.resend_url):
            self.sqs.delete_queue(QueueUrl=url)
        self._tmp.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.local_stack.whatsapp_channel")
    parser.add_argument("role", choices=("ingress", "consumer"))
    parser.add_argument("--env-file", type=Path, required=True)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--queue-url")
    parser.add_argument("--resend-queue-url")
    args = parser.parse_args(argv)
    os.environ.update(json.loads(args.env_file.read_text()))
    if args.role == "ingress":
        serve_ingress(args.port_file)
    else:
        from .whatsapp_worker import run_consumer

        run_consumer(args.queue_url, args.resend_queue_url)


if __name__ == "__main__":
    main()

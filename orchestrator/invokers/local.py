"""Tool handlers called in this process, as Lambda would call them.

Each tool runs with *its own* environment (its DB user, its settings), swapped
into ``os.environ`` for the duration of the call, one call at a time — a Lambda
execution environment also serves one request at a time. The event and the
response go through ``json.dumps``/``json.loads`` so nothing that Lambda could
not carry (a Decimal, a datetime, an object) passes locally by accident.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cadencia_shared.catalog import ToolSpec

from ..sealing import sealed
from .base import Invocation, InvocationStatus

_env_lock = threading.RLock()


@contextmanager
def function_environment(env: Mapping[str, str]) -> Iterator[None]:
    with _env_lock:
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)


@dataclass
class LocalContext:
    """The attributes of a LambdaContext that Powertools reads."""

    function_name: str
    timeout_s: float = 8.0
    memory_limit_in_mb: int = 256
    function_version: str = "$LATEST"

    def __post_init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + self.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class InProcessInvoker:
    def __init__(self, environments: Mapping[str, Mapping[str, str]]) -> None:
        self.environments = {k: dict(v) for k, v in environments.items()}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, tool: ToolSpec, event: dict[str, Any]) -> Invocation:
        wire_event = json.loads(json.dumps(sealed(tool.name, event)))
        self.calls.append((tool.name, wire_event))
        with function_environment(self.environments[tool.name]):
            handler = importlib.import_module(f"{tool.package}.handler").lambda_handler
            try:
                response = handler(wire_event, LocalContext(tool.function_name))
            except Exception as err:  # what Lambda reports as FunctionError: Unhandled
                traceback.print_exc()
                return Invocation(InvocationStatus.FUNCTION_ERROR, detail=type(err).__name__)
        try:
            payload = json.loads(json.dumps(response))
        except (TypeError, ValueError) as err:
            return Invocation(InvocationStatus.FUNCTION_ERROR, detail=f"resposta não serializável: {err}")
        return Invocation(InvocationStatus.OK, payload=payload)

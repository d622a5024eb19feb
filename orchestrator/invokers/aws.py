"""``lambda:InvokeFunction`` on the tool's own function (the orchestrator's role
may invoke exactly the three tool functions and nothing else)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from cadencia_shared.catalog import ToolSpec

from ..sealing import sealed
from .base import Invocation, InvocationStatus

# No SDK retries: a re-sent invoke would be a second attempt the ceiling never
# counted. Throttling and timeouts come back to the orchestrator as typed outcomes.
INVOKE_CONFIG = Config(connect_timeout=2, read_timeout=15, retries={"max_attempts": 1, "mode": "standard"})

_THROTTLING = {"TooManyRequestsException", "ThrottlingException", "EC2ThrottledException"}


class LambdaInvoker:
    def __init__(self, lambda_client: Any, function_names: Mapping[str, str]) -> None:
        self.client = lambda_client
        self.function_names = dict(function_names)

    def invoke(self, tool: ToolSpec, event: dict[str, Any]) -> Invocation:
        name = self.function_names.get(tool.name, tool.function_name)
        payload = json.dumps(sealed(tool.name, event)).encode()  # the turn's envelope (orchestrator/sealing.py)
        try:
            resp = self.client.invoke(FunctionName=name, InvocationType="RequestResponse", Payload=payload)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            status = InvocationStatus.THROTTLED if code in _THROTTLING else InvocationStatus.INVOKE_FAILED
            return Invocation(status, detail=code)
        except (ReadTimeoutError, ConnectTimeoutError) as err:
            return Invocation(InvocationStatus.TIMEOUT, detail=type(err).__name__)
        except EndpointConnectionError as err:
            return Invocation(InvocationStatus.INVOKE_FAILED, detail=type(err).__name__)
        raw = resp["Payload"].read()
        body = json.loads(raw) if raw else None
        if resp.get("FunctionError"):
            message = (body or {}).get("errorMessage", "") if isinstance(body, dict) else ""
            error_type = (body or {}).get("errorType", "") if isinstance(body, dict) else ""
            timed_out = "Task timed out" in message or error_type == "Sandbox.Timedout"
            return Invocation(
                InvocationStatus.TIMEOUT if timed_out else InvocationStatus.FUNCTION_ERROR,
                detail=error_type or resp["FunctionError"],
            )
        if not isinstance(body, dict):
            return Invocation(InvocationStatus.FUNCTION_ERROR, detail="resposta não é um objeto JSON")
        return Invocation(InvocationStatus.OK, payload=body)

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from cadencia_shared.catalog import ToolSpec


class InvocationStatus(StrEnum):
    OK = "ok"  # the tool answered (a typed refusal is still OK: see payload["ok"])
    FUNCTION_ERROR = "erro_da_funcao"  # the handler crashed (Lambda FunctionError)
    TIMEOUT = "tempo_esgotado"  # the function or the call timed out
    THROTTLED = "limitada"  # Lambda refused to run it (concurrency / rate)
    INVOKE_FAILED = "falha_ao_invocar"  # could not reach or authorize the invoke


@dataclass(frozen=True)
class Invocation:
    status: InvocationStatus
    payload: dict[str, Any] | None = None
    detail: str | None = None

    @property
    def answered(self) -> bool:
        return self.status is InvocationStatus.OK and self.payload is not None


class ToolInvoker(Protocol):
    def invoke(self, tool: ToolSpec, event: dict[str, Any]) -> Invocation: ...

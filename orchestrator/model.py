"""Calling the model within the time the Lambda has left.

The SDK's own retries are switched off (``max_retries=0``): it would honour a
``retry-after`` of any length and could outlive the function. Here each call's
timeout is capped by the turn's deadline, retries are by error class (429, 529,
5xx, timeouts, connection errors), bounded in number and in backoff, and a wait
that would not fit the deadline is not started. Anything else fails at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import anthropic
from anthropic.types import Message

from cadencia_shared.observability import cap_sdk_loggers

from .prompt_cache import NO_CACHE, CacheLayout
from .settings import ModelProvider, OrchestratorSettings

# anthropic's import honours ANTHROPIC_LOG=debug by lowering its loggers (and its
# HTTP stack's): capped again now that it is imported (request bodies hold
# personal data; see cadencia_shared.observability).
cap_sdk_loggers()


class ModelErrorClass(StrEnum):
    RATE_LIMITED = "limite_de_taxa"  # 429
    OVERLOADED = "sobrecarga"  # 529
    SERVER = "erro_do_servidor"  # other 5xx
    TIMEOUT = "tempo_esgotado"
    CONNECTION = "conexao"
    CONTEXT_WINDOW = "janela_de_contexto"  # prompt too long (400) — handled by trimming
    REJECTED = "requisicao_recusada"  # other 4xx: a bug or a credential problem, never retried
    DEADLINE = "sem_tempo"  # not enough time left to try (again)


RETRYABLE = {ModelErrorClass.RATE_LIMITED, ModelErrorClass.OVERLOADED, ModelErrorClass.SERVER,
             ModelErrorClass.TIMEOUT, ModelErrorClass.CONNECTION}


class ModelUnavailable(Exception):
    """``sdk_error``: the class name of the SDK's last error (e.g. ``APIConnectionError``), empty when no
    call was made; what an engineer needs to tell a wrong URL from a wrong key (no message: it may echo
    the request)."""

    def __init__(self, error_class: ModelErrorClass, attempts: int, detail: str = "", sdk_error: str = "") -> None:
        super().__init__(f"model unavailable ({error_class}) after {attempts} attempt(s) {detail}".strip())
        self.error_class = error_class
        self.attempts = attempts
        self.sdk_error = sdk_error


class ContextWindowExceeded(Exception):
    pass


@dataclass
class Deadline:
    """Seconds left in this invocation (Lambda's ``get_remaining_time_in_millis``)."""

    remaining_ms: Callable[[], int]

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        end = clock() + seconds
        return cls(lambda: int((end - clock()) * 1000))

    def remaining_s(self) -> float:
        return self.remaining_ms() / 1000


def classify(err: Exception) -> ModelErrorClass:
    if isinstance(err, anthropic.APITimeoutError):
        return ModelErrorClass.TIMEOUT
    if isinstance(err, anthropic.APIConnectionError):
        return ModelErrorClass.CONNECTION
    if isinstance(err, anthropic.RateLimitError):
        return ModelErrorClass.RATE_LIMITED
    if isinstance(err, anthropic.OverloadedError):
        return ModelErrorClass.OVERLOADED
    if isinstance(err, anthropic.InternalServerError):
        return ModelErrorClass.SERVER
    if isinstance(err, anthropic.APIStatusError):
        message = str(getattr(err, "message", err)).lower()
        if err.status_code in (400, 413) and ("prompt is too long" in message or "context" in message):
            return ModelErrorClass.CONTEXT_WINDOW
        if err.status_code == 408:
            return ModelErrorClass.TIMEOUT
    return ModelErrorClass.REJECTED


def _retry_after_s(err: Exception) -> float | None:
    response = getattr(err, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value:
            try:
                return float(value) / scale
            except ValueError:
                return None
    return None


@dataclass
class ModelClient:
    sdk: Any  # anthropic.Anthropic or anthropic.AnthropicBedrock
    model: str
    max_tokens: int
    call_timeout_s: float = 25.0
    max_attempts: int = 3
    backoff_cap_s: float = 4.0
    min_call_s: float = 2.0  # below this, a call is not worth starting
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    cache: CacheLayout = NO_CACHE  # where requests carry cache_control (orchestrator.prompt_cache)

    def create(
        self, *, system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]], deadline: Deadline,
        reserve_s: float = 0.0, tool_choice: dict[str, Any] | None = None,
    ) -> Message:
        choice = {} if tool_choice is None else {"tool_choice": tool_choice}
        marked_system, marked = self.cache.system(system), self.cache.messages(messages)
        attempt = 0
        while True:
            attempt += 1
            budget = deadline.remaining_s() - reserve_s
            if budget < self.min_call_s:
                raise ModelUnavailable(ModelErrorClass.DEADLINE, attempt - 1)
            try:
                return self.sdk.with_options(timeout=min(self.call_timeout_s, budget), max_retries=0).messages.create(
                    model=self.model, max_tokens=self.max_tokens, system=marked_system, tools=tools,
                    messages=marked, **choice,
                )
            except anthropic.APIError as err:
                error_class = classify(err)
                if error_class is ModelErrorClass.CONTEXT_WINDOW:
                    raise ContextWindowExceeded(str(err)) from None
                if error_class not in RETRYABLE or attempt >= self.max_attempts:
                    raise ModelUnavailable(error_class, attempt, type(err).__name__,
                                           sdk_error=type(err).__name__) from None
                # Full jitter, capped; a server's retry-after is honoured only up to the cap.
                wait = min(self.backoff_cap_s, self.rng.uniform(0, 0.5 * 2**attempt))
                hinted = _retry_after_s(err)
                if hinted is not None:
                    wait = min(self.backoff_cap_s, hinted)
                if deadline.remaining_s() - reserve_s - wait < self.min_call_s:
                    raise ModelUnavailable(ModelErrorClass.DEADLINE, attempt, f"after {error_class}",
                                           sdk_error=type(err).__name__) from None
                self.sleep(wait)


def build_sdk(settings: OrchestratorSettings, *, api_key: str | None = None, http_client: Any = None) -> Any:
    """The SDK client for the configured provider (SDK retries off: see module doc)."""
    if settings.provider is ModelProvider.BEDROCK:
        return anthropic.AnthropicBedrock(aws_region=settings.aws.region, max_retries=0, http_client=http_client)
    return anthropic.Anthropic(api_key=api_key, base_url=settings.base_url, max_retries=0, http_client=http_client)


def model_client(settings: OrchestratorSettings, sdk: Any) -> ModelClient:
    return ModelClient(
        sdk=sdk,
        model=settings.model_id,
        max_tokens=settings.max_tokens,
        call_timeout_s=settings.model_timeout_s,
        max_attempts=settings.model_max_attempts,
        backoff_cap_s=settings.model_backoff_cap_s,
        cache=CacheLayout(settings.prompt_cache_prefix_ttl, settings.prompt_cache_ttl),
    )

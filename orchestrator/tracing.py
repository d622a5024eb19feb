"""Spans of a turn, OpenTelemetry-style: the turn, each model call, each control's
decision, each tool call (an approval is the confirmation gate's decision) and the commit.

Attribute names follow OpenTelemetry's GenAI semantic conventions (``gen_ai.*``) where
one exists, ``cadencia.*`` otherwise. No personal data, no content: never a message,
an argument or a result; the conversation (and the model's tool-call id, text the model
wrote) is named by a SHA-256 prefix of its id (the
console's timeline hashes the id it shows the same way: ``conversation_ref``); orders,
customers and amounts never appear.

Exporters (``TRACE_MODE``): ``off`` (default); ``jsonl``, one JSON line per ended span
appended to ``TRACE_FILE`` (the local stack); ``xray``, Powertools' Tracer, one
subsegment per span with the attributes as annotations (in AWS; imported only then:
``Tracer()`` costs ~210 ms of cold start).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Attributes = dict[str, str | int | float | bool]
_current: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("cadencia_span", default=None)


def conversation_ref(conversation_id: str) -> str:
    """A SHA-256 prefix: names a conversation (or a model-written id) without saying it."""
    return hashlib.sha256(conversation_id.encode()).hexdigest()[:16]


class Span:
    def __init__(self, attributes: Attributes) -> None:
        self.attributes = attributes
        self.status = "OK"

    def set(self, **attributes: str | int | float | bool) -> None:
        self.attributes.update({k.replace("__", "."): v for k, v in attributes.items()})

    def put(self, attributes: Attributes) -> None:
        self.attributes.update(attributes)


class Tracer:
    """No export (``off``): spans cost a dict and are dropped."""

    @contextmanager
    def span(self, name: str, attributes: Attributes | None = None) -> Iterator[Span]:
        yield Span(dict(attributes or {}))


class JsonlTracer(Tracer):
    def __init__(self, path: str | Path, clock: Callable[[], float] = time.time) -> None:
        self.path, self.clock = Path(path), clock
        self._lock = threading.Lock()

    @contextmanager
    def span(self, name: str, attributes: Attributes | None = None) -> Iterator[Span]:
        parent = _current.get()
        trace_id = parent[0] if parent else secrets.token_hex(16)
        span_id = secrets.token_hex(8)
        token = _current.set((trace_id, span_id))
        span, start = Span(dict(attributes or {})), self.clock()
        try:
            yield span
        except BaseException as err:
            span.status = "ERROR"
            span.attributes["error.type"] = type(err).__name__
            raise
        finally:
            _current.reset(token)
            record = {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent[1] if parent else None,
                      "name": name, "startTime": start, "endTime": self.clock(), "status": span.status,
                      "attributes": span.attributes}
            line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
            with self._lock, self.path.open("a", encoding="utf-8") as out:
                out.write(line)


class XRayTracer(Tracer):
    def __init__(self) -> None:  # pragma: no cover - Powertools' Tracer is a no-op outside a Lambda
        from aws_lambda_powertools import Tracer as PowertoolsTracer

        self.tracer = PowertoolsTracer(service="orchestrator")

    @contextmanager
    def span(self, name: str, attributes: Attributes | None = None) -> Iterator[Span]:
        span = Span(dict(attributes or {}))
        failed: BaseException | None = None
        with self.tracer.provider.in_subsegment(f"## {name}") as subsegment:
            try:
                yield span
            except BaseException as err:
                # Caught inside the subsegment: X-Ray's would record ``str(err)``, which may
                # name a conversation or echo a customer's text. The type only, as in JSONL.
                failed, span.status = err, "ERROR"
                span.attributes["error.type"] = type(err).__name__
                fault = getattr(subsegment, "add_fault_flag", None)  # X-Ray's; not in Powertools' protocol
                if fault is not None:
                    fault()
            finally:
                for key, value in span.attributes.items():
                    # int and float are numbers.Number at run time (registered ABCs), which mypy cannot see.
                    subsegment.put_annotation(key.replace(".", "_"), value)  # type: ignore[arg-type]
        if failed is not None:
            raise failed


def tracer_from_env(environ: dict[str, str] | None = None) -> Tracer:
    env = os.environ if environ is None else environ
    mode = env.get("TRACE_MODE", "off")
    if mode == "jsonl":
        return JsonlTracer(env.get("TRACE_FILE") or "cadencia-traces.jsonl")
    if mode == "xray":
        return XRayTracer()
    if mode != "off":
        raise ValueError(f"TRACE_MODE must be off, jsonl or xray (got {mode!r})")
    return Tracer()


def model_call_attributes(provider: str, model: str) -> Attributes:
    return {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "aws.bedrock" if provider == "bedrock"
            else "anthropic", "gen_ai.request.model": model}


def usage_attributes(response: Any) -> Attributes:
    usage = getattr(response, "usage", None)
    out: Attributes = {"gen_ai.response.finish_reasons": str(getattr(response, "stop_reason", "") or "")}
    for name, key in (("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens"),
                      ("cache_read_input_tokens", "gen_ai.usage.cache_read.input_tokens"),
                      ("cache_creation_input_tokens", "gen_ai.usage.cache_creation.input_tokens")):
        value = getattr(usage, name, None)
        if isinstance(value, int):
            out[key] = value
    return out

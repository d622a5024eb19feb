"""Collect the EMF metrics that Powertools prints, so the local stack can show
and count them the way CloudWatch would.

Powertools Metrics writes each EMF document as one JSON line on stdout. In AWS
the Lambda runtime ships it to CloudWatch Logs, which extracts the metrics.
Locally ``capture_emf`` stands in for that: it tees stdout, keeps the EMF lines
(optionally appending them to a JSONL file) and passes every other line through.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO


@dataclass(frozen=True)
class MetricPoint:
    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]
    value: float


def points(document: dict[str, Any]) -> list[MetricPoint]:
    """The metric points of one EMF document."""
    out = []
    for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
        for dim_set in directive.get("Dimensions", [[]]) or [[]]:
            dims = tuple((d, str(document.get(d))) for d in dim_set)
            for metric in directive.get("Metrics", []):
                raw = document.get(metric["Name"], 0)
                for value in raw if isinstance(raw, list) else [raw]:
                    out.append(MetricPoint(directive["Namespace"], metric["Name"], dims, float(value)))
    return out


class _EmfTee(io.TextIOBase):
    def __init__(self, passthrough: TextIO, sink: Path | None) -> None:
        self.passthrough = passthrough
        self.sink = sink
        self.documents: list[dict[str, Any]] = []
        self._buffer = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        with self._lock:
            self._buffer += s
            while "\n" in self._buffer:
                line, self._buffer = self._buffer.split("\n", 1)
                self._line(line)
        return len(s)

    def _line(self, line: str) -> None:
        if line.startswith("{") and '"_aws"' in line:
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            if isinstance(doc, dict) and "CloudWatchMetrics" in doc.get("_aws", {}):
                self.documents.append(doc)
                if self.sink is not None:
                    with self.sink.open("a", encoding="utf-8") as fh:
                        fh.write(line + "\n")
                return
        self.passthrough.write(line + "\n")

    def flush(self) -> None:
        self.passthrough.flush()


class EmfCapture:
    def __init__(self, tee: _EmfTee) -> None:
        self._tee = tee

    @property
    def documents(self) -> list[dict[str, Any]]:
        return list(self._tee.documents)

    def points(self) -> list[MetricPoint]:
        return [p for doc in self.documents for p in points(doc)]

    def totals(self) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
        return totals(self.points())


def totals(pts: Iterable[MetricPoint]) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
    counter: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
    for p in pts:
        counter[(p.name, p.dimensions)] += p.value
    return counter


@contextmanager
def capture_emf(sink: Path | None = None) -> Iterator[EmfCapture]:
    tee = _EmfTee(sys.stdout, sink)
    previous, sys.stdout = sys.stdout, tee  # type: ignore[assignment]
    try:
        yield EmfCapture(tee)
    finally:
        sys.stdout = previous
        if tee._buffer:
            tee._line(tee._buffer)


def read_sink(path: Path) -> list[MetricPoint]:
    if not path.exists():
        return []
    return [p for line in path.read_text().splitlines() if line.strip() for p in points(json.loads(line))]

"""One measurement: AWS calls and units, SQL, log bytes and CPU of a block of code."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg

from .aws_count import AwsCounter, Figures
from .sql_trace import SqlCount, traced


@dataclass
class Measurement:
    design: str  # "cadencia" | "lab87"
    scenario: str
    scope: str  # "ferramenta" (the tool or the gate alone) | "turno" (a whole customer message)
    aws: Figures = field(default_factory=Figures)
    sql: SqlCount = field(default_factory=SqlCount)
    log_bytes: int = 0
    emf_lines: int = 0
    cpu_s: float = 0.0
    lambda_requests: int = 0  # tool invocations (+1: this project's orchestrator, per turn)

    @property
    def secret_reads(self) -> int:
        return self.aws.calls.get("secretsmanager.GetSecretValue", 0)

    def aws_calls(self) -> int:
        """AWS API calls, the tool invocations (lambda.Invoke) included."""
        return self.aws.total_calls()


@contextmanager
def captured_output() -> Iterator[dict[str, int]]:
    """Bytes written to fd 1 and 2 while the block runs (Powertools' handlers hold
    their own reference to sys.stdout, so the file descriptors are swapped)."""
    out: dict[str, int] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield out
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sink.seek(0)
            data = sink.read()
            out["bytes"] = len(data)
            out["emf"] = sum(1 for line in data.splitlines() if b'"_aws"' in line)


@contextmanager
def measuring(counter: AwsCounter, measurement: Measurement,
              connections: Iterable[psycopg.Connection]) -> Iterator[Measurement]:
    with captured_output() as out, traced(connections) as sql, counter.measuring() as aws:
        start = time.thread_time()  # this thread only: the scripted model's server thread is not counted
        yield measurement
        measurement.cpu_s = time.thread_time() - start
    measurement.aws, measurement.sql = aws, sql
    measurement.log_bytes, measurement.emf_lines = out["bytes"], out["emf"]
    measurement.lambda_requests += aws.calls.get("lambda.Invoke", 0)

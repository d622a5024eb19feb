"""What a turn's model calls cost: tokens by kind, latency and dollars, counted from each
response's ``usage`` and emitted as one EMF record per turn.

Dollars: input-token equivalents at the configured input price (a cache read 0.1×, a
5-minute write 1.25×, a 1-hour write 2×, Anthropic's and Bedrock's multipliers) plus the
output at the output price. Prices are settings (MODEL_PRECO_ENTRADA_USD_MTOK,
MODEL_PRECO_SAIDA_USD_MTOK): the list price of the configured model, not a measurement.
No content, no customer: counts, seconds, dollars and the model id only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from cadencia_shared.observability import NAMESPACE

CACHE_READ, CACHE_WRITE_5M, CACHE_WRITE_1H = 0.1, 1.25, 2.0


class TurnMetric:
    """Metric names (wire names, like the others in the namespace)."""

    INPUT = "TokensEntrada"
    OUTPUT = "TokensSaida"
    CACHE_READ = "TokensLidosDoCache"
    CACHE_WRITE = "TokensGravadosNoCache"
    LATENCY = "LatenciaDoModelo"  # seconds, all of the turn's model calls
    COST = "CustoDoModeloUSD"
    CALLS = "ChamadasAoModelo"


# No response bills more tokens of one kind than this (context windows and output
# limits are far below it); a larger figure from a broken proxy counts as this, so it
# still spends the turn's token budget (and $300 at $3/MTok) but stays a float and fits a DynamoDB number (an int of
# 40 digits made the commit fail, 400 digits the pricing: the turn died uncommitted).
MAX_COUNT = 100_000_000


def count(usage: Any, name: str) -> int:
    """A count from ``usage``; anything but a non-negative int counts 0 (a negative
    figure from a broken proxy must never give budget back), capped at ``MAX_COUNT``."""
    value = getattr(usage, name, None)
    return min(value, MAX_COUNT) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0



@dataclass
class TurnUsage:
    input_price: float  # USD per million input tokens
    output_price: float  # USD per million output tokens
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    calls: int = 0

    def add(self, usage: Any, latency_s: float) -> float:
        """One response's figures; returns its cost in USD."""
        self.calls += 1
        self.latency_s += latency_s
        if usage is None:
            return 0.0
        written = count(usage, "cache_creation_input_tokens")
        creation = getattr(usage, "cache_creation", None)
        one_hour = min(written, count(creation, "ephemeral_1h_input_tokens")) if creation is not None else 0
        fresh, read, output = count(usage, "input_tokens"), count(usage, "cache_read_input_tokens"), \
            count(usage, "output_tokens")
        billed = fresh + CACHE_READ * read + CACHE_WRITE_5M * (written - one_hour) + CACHE_WRITE_1H * one_hour
        cost = (billed * self.input_price + output * self.output_price) / 1e6
        self.input_tokens += fresh
        self.output_tokens += output
        self.cache_read += read
        self.cache_write += written
        self.cost_usd += cost
        return cost

    def emit(self, model_id: str) -> None:
        """One EMF record for the turn (nothing when the model was not called)."""
        if not self.calls:
            return
        metrics = EphemeralMetrics(namespace=NAMESPACE)
        metrics.add_dimension(name="Modelo", value=model_id[:250])
        for name, unit, value in (
                (TurnMetric.INPUT, MetricUnit.Count, self.input_tokens),
                (TurnMetric.OUTPUT, MetricUnit.Count, self.output_tokens),
                (TurnMetric.CACHE_READ, MetricUnit.Count, self.cache_read),
                (TurnMetric.CACHE_WRITE, MetricUnit.Count, self.cache_write),
                (TurnMetric.CALLS, MetricUnit.Count, self.calls),
                (TurnMetric.LATENCY, MetricUnit.Seconds, round(self.latency_s, 3)),
                (TurnMetric.COST, MetricUnit.NoUnit, round(self.cost_usd, 6))):
            metrics.add_metric(name=name, unit=unit, value=value)
        metrics.flush_metrics()

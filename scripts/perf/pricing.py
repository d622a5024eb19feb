"""List prices the benchmark multiplies its counts by, with their date.

AWS list prices, us-east-1, on demand, as published in 2025 (the most recent
the author could check; the same table as docs/infrastructure.md). Check the
current price pages before quoting a figure outside this repository.
"""

from __future__ import annotations

from .measure import Measurement

PRICES_AS_OF = "AWS list prices, us-east-1, on demand, as published in 2025"
DYNAMODB_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_READ_UNIT = 0.125 / 1e6
LAMBDA_REQUEST = 0.20 / 1e6
SECRETS_MANAGER_CALL = 0.05 / 10_000
PUT_METRIC_DATA_CALL = 0.01 / 1_000
EVENTBRIDGE_EVENT = 1.00 / 1e6
LOGS_PER_BYTE = 0.50 / 1e9  # CloudWatch Logs ingestion, $/GB

EXCLUDED = ("model tokens", "Lambda duration (GB-s: not measurable here)", "X-Ray traces",
            "EMF custom metrics ($0.30 per metric-month, not per call)", "Aurora and NAT (not per call)")


def per_million(m: Measurement) -> float:
    """$ per 1,000,000 repetitions of what ``m`` measured."""
    calls = m.aws.calls
    dollars = (m.aws.total_write_units * DYNAMODB_WRITE_UNIT
               + m.aws.read_units * DYNAMODB_READ_UNIT
               + m.lambda_requests * LAMBDA_REQUEST
               + calls.get("secretsmanager.GetSecretValue", 0) * SECRETS_MANAGER_CALL
               + calls.get("cloudwatch.PutMetricData", 0) * PUT_METRIC_DATA_CALL
               + calls.get("events.PutEvents", 0) * EVENTBRIDGE_EVENT
               + m.log_bytes * LOGS_PER_BYTE)
    return dollars * 1e6


# -- the model, per million tokens (USD) --------------------------------------------------
# Anthropic's list prices for Claude Sonnet 4.5 and Claude Haiku 4.5, standard tier, as
# shown on Anthropic's pricing page (platform.claude.com/docs/en/about-claude/pricing),
# read 2026-12-05. Cache multipliers (same page): a read 0.1× input, a 5-minute write
# 1.25×, a 1-hour write 2×. Bedrock lists the same prices for these models in us-east-1.
MODEL_PRICES_AS_OF = "Anthropic list prices (platform.claude.com pricing page), read 2026-12-05"
MODEL_PRICES = {  # name: (input $/MTok, output $/MTok)
    "Claude Sonnet 4.5": (3.00, 15.00),
    "Claude Haiku 4.5": (1.00, 5.00),
}
CACHE_READ, CACHE_WRITE_5M, CACHE_WRITE_1H = 0.1, 1.25, 2.0
# Lambda duration, x86, us-east-1: $ per GB-second (the orchestrator has 1,024 MB: infra/channel.py).
LAMBDA_GB_SECOND = 0.0000166667
ORCHESTRATOR_GB = 1.0


def model_dollars(price: tuple[float, float], billed_input: float, output_tokens: float) -> float:
    """$ for ``billed_input`` input-token equivalents (cache multipliers applied) and output."""
    return (billed_input * price[0] + output_tokens * price[1]) / 1e6


def lambda_dollars(seconds: float) -> float:
    return seconds * ORCHESTRATOR_GB * LAMBDA_GB_SECOND

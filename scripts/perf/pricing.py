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

"""Reserved concurrency sized from the expected load (docs/performance.md, *Scale on paper*).

An orchestrator environment is busy for a whole turn, mostly waiting for the model, so the
environments needed at once are the turns per second of the busiest hour times the seconds
a turn lasts (Little's law). Sized for the busiest hour, not the day's average: a reservation
short of the peak throttles turns exactly when customers are writing.
"""

from __future__ import annotations

import math

DAYS_PER_MONTH = 30
BUSIEST_HOUR_SHARE = 0.15  # the share of a day's turns in its busiest hour (an assumption, stated)
TURN_SECONDS = 6.0         # a turn's wall time, mostly the model's round trips (measured figure)
DEFAULT_MONTHLY_TURNS = 2_400_000  # ~80,000 turns a day: the 20 orchestrators deployed by default
# Lambda keeps at least this much of an account's concurrency unreserved; an account starts
# with 1,000 in a Region until a quota increase is granted.
UNRESERVED_MINIMUM = 100
DEFAULT_ACCOUNT_CONCURRENCY = 1000


def orchestrators_needed(monthly_turns: int, *, turn_seconds: float = TURN_SECONDS,
                         busiest_hour_share: float = BUSIEST_HOUR_SHARE) -> int:
    """Environments busy at once in the busiest hour, rounded up (at least one)."""
    per_second = monthly_turns / DAYS_PER_MONTH * busiest_hour_share / 3600
    # Rounded to a millionth first so 20.000000001 from float division is 20, not 21.
    return max(1, math.ceil(round(per_second * turn_seconds, 6)))

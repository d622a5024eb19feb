"""The inbound queue's timing, derived from the conversation lease (one rule for the
stack and the local channel).

A consumer that dies mid-turn keeps its conversation leased until the lease runs
out (``orchestrator.loop``: the configured lease, or the turn's time left plus
``LEASE_MARGIN_S`` when that is longer). Until then every message of that
conversation is refused as busy and comes back later. So that none of them runs out
of receives (and lands unanswered in the dead-letter queue) while the lease is
held:

- the visibility timeout outlasts the held lease plus one turn (the dead consumer's
  own message reappears only after its lease);
- the receives after the first, ``redelivery_s`` apart, outlast it too.

In AWS a failed record reappears after the visibility timeout (the event source
mapping), which is 6 x the function's timeout (AWS's advice). Locally the consumer
makes a failed record visible again after ``redelivery_s``, shorter for speed, but
never shorter than the rule allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LEASE_MARGIN_S = 30  # orchestrator.loop: lease = max(configured lease, time left + this)
MAX_RECEIVES = 5
VISIBILITY_PER_TURN = 6  # AWS's advice for an SQS event source mapping


@dataclass(frozen=True)
class QueueTiming:
    visibility_s: int
    redelivery_s: int  # between two receives of a record that failed
    max_receives: int  # then the dead-letter queue (alarmed)


def held_lease_s(lease_s: int, turn_timeout_s: int) -> int:
    """How long a turn's conversation lease can outlive the consumer that took it."""
    return max(lease_s, turn_timeout_s + LEASE_MARGIN_S)


def queue_timing(*, turn_timeout_s: int, lease_s: int, redelivery_s: int | None = None) -> QueueTiming:
    """The queue's settings for turns of ``turn_timeout_s`` and a lease of ``lease_s``;
    ``redelivery_s`` is a wish (None: the visibility timeout, as in AWS), raised to
    what the rule needs."""
    must_outlast = held_lease_s(lease_s, turn_timeout_s) + turn_timeout_s
    visibility = max(VISIBILITY_PER_TURN * turn_timeout_s, must_outlast)
    wanted = visibility if redelivery_s is None else redelivery_s
    redelivery = max(wanted, math.ceil(must_outlast / (MAX_RECEIVES - 1)))
    return QueueTiming(visibility_s=visibility, redelivery_s=redelivery, max_receives=MAX_RECEIVES)


# How long the inbound queue keeps a message (infra/channel.py): SQS deletes it after that.
INBOUND_RETENTION_S = 4 * 24 * 3600


def max_assertion_age_s(timing: QueueTiming, retention_s: int = INBOUND_RETENTION_S) -> int:
    """How old an ingress's assertion (``canal_whatsapp.assertion``) may be when the
    consumer reads it. A legitimate message is read at the latest when the queue would
    delete it (its retention), and never after its last receive (``max_receives`` x
    the visibility timeout, far shorter with this rule): the bound is the longer of the
    two, so no message the ingress enqueued is refused as stale while SQS still
    delivers it; the clock skew between the two functions is allowed on top."""
    from .assertion import CLOCK_SKEW_S

    return max(retention_s, timing.max_receives * timing.visibility_s) + CLOCK_SKEW_S

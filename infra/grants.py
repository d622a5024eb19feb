"""The contract's vocabulary: a grant, an AWS managed policy, a role's contract, and
how a resource narrowed to some partition keys is written (``scoped``). Split from
``infra/contract.py`` (which re-exports all of it) to keep that table of roles
readable."""

from __future__ import annotations

from dataclasses import dataclass, field

WILDCARD = "*"
# X-Ray has no resource-level permissions: PutTraceSegments/PutTelemetryRecords
# only accept "*". It is the one wildcard resource the contract allows.
XRAY_ACTIONS = ("xray:PutTraceSegments", "xray:PutTelemetryRecords")
LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
LEADING_KEYS = "dynamodb:LeadingKeys"
LEADING_KEYS_CONDITION = "ForAllValues:StringLike"  # the one condition the contract can express


def scoped(resource: str, leading_keys: tuple[str, ...]) -> str:
    """How a resource narrowed to some partition keys is written (in the contract,
    the access matrix and what ``policy_check`` reads from the template)."""
    if not leading_keys:
        return resource
    return f"{resource} where {LEADING_KEYS} like {' | '.join(sorted(leading_keys))}"


def unscoped(resource: str) -> str:
    """The ARN of a (possibly scoped) resource."""
    return resource.split(f" where {LEADING_KEYS} ", 1)[0]


@dataclass(frozen=True)
class Grant:
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    why: str
    # Set: only items whose partition key matches one of these patterns
    # (``Condition: {ForAllValues:StringLike: {dynamodb:LeadingKeys: [...]}}``).
    leading_keys: tuple[str, ...] = ()

    def pairs(self) -> set[tuple[str, str]]:
        return {(a, scoped(r, self.leading_keys)) for a in self.actions for r in self.resources}


@dataclass(frozen=True)
class ManagedPolicy:
    name: str  # as in the ARN after arn:aws:iam::aws:policy/
    grants: tuple[str, ...]  # what AWS's document allows (for the access matrix; AWS owns the text)
    why: str

    @property
    def arn_suffix(self) -> str:
        return f":iam::aws:policy/{self.name}"


@dataclass(frozen=True)
class RoleContract:
    logical_id: str
    role_name: str | None
    service: str  # the only principal allowed to assume it
    purpose: str
    grants: tuple[Grant, ...]
    managed_policies: tuple[ManagedPolicy, ...] = field(default_factory=tuple)

    def pairs(self) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for grant in self.grants:
            out |= grant.pairs()
        return out


def platform(log_group_arn: str) -> tuple[Grant, ...]:
    """What every Lambda's role holds: its own log group, and active tracing."""
    return (
        Grant(LOG_ACTIONS, (log_group_arn,), "write its own log group (created by the stack, 30-day retention)"),
        Grant(XRAY_ACTIONS, (WILDCARD,), "active tracing; X-Ray has no resource-level permissions (the one \"*\")"),
    )

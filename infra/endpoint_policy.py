"""What the demo VPC's DynamoDB gateway endpoint allows, derived from the contract.

A gateway endpoint applies to every DynamoDB call from the subnets whose route
tables it is attached to (both private tiers here), so its policy must allow each
call the functions in those subnets make, and nothing more. Those functions are
the roles of ``contract.build`` that carry the VPC's network-interface policy
(``ENI_MANAGEMENT``: ``base.lambda_role`` attaches it exactly to the functions it
places in the VPC); their DynamoDB grants, with a partition-key scope kept only
where no unscoped grant of the same action and table covers it, are the endpoint's
statements. ``tests/infra/test_vpc_endpoints.py`` checks the result on the
synthesized template against the roles themselves, in both directions.
"""

from __future__ import annotations

from .config import StackConfig
from .contract import ENI_MANAGEMENT, Grant, RoleContract, build

SERVICE = "dynamodb"


def runs_in_vpc(role: RoleContract) -> bool:
    return ENI_MANAGEMENT in role.managed_policies


def dynamodb_grants(config: StackConfig) -> tuple[Grant, ...]:
    """The endpoint's statements: one per (table or index, key scope), its actions sorted."""
    scoped: set[tuple[str, str, tuple[str, ...]]] = set()
    for role in build(config):
        if not runs_in_vpc(role):
            continue
        for grant in role.grants:
            for action in grant.actions:
                if action.startswith(f"{SERVICE}:"):
                    scoped |= {(action, resource, tuple(sorted(grant.leading_keys))) for resource in grant.resources}
    unscoped = {(action, resource) for action, resource, keys in scoped if not keys}
    needed = {(a, r, k) for a, r, k in scoped if not k or (a, r) not in unscoped}
    statements: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for action, resource, keys in needed:
        statements.setdefault((resource, keys), []).append(action)
    return tuple(Grant(tuple(sorted(actions)), (resource,), "a call of a function in the VPC", keys)
                 for (resource, keys), actions in sorted(statements.items()))

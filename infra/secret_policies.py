"""Each secret's resource policy: only the roles the contract names may read it.

An identity policy says what a role may do; it does not stop another principal of the
account (an operator, a CI role, a mis-scoped function) that was granted
``secretsmanager:GetSecretValue`` broadly from reading the gateway's or the WhatsApp
tokens. So every secret of the stack that the contract (``infra/contract.py``) grants
to some role carries one ``Deny`` of ``GetSecretValue`` to every principal whose
``aws:PrincipalArn`` is not one of those roles. A Deny wins over any Allow; the list is
derived from the contract, never written here. The roles' ARNs are built from their
fixed names (the roles' own policies already name the secrets: tokens both ways would
be a cycle). A secret no role of the contract reads is left alone (the database
cluster's, which RDS and the Data API read as services).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from aws_cdk import CfnElement, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager

from .contract import RoleContract, ref

READ_SECRET = "secretsmanager:GetSecretValue"
SID = "OnlyTheContractsReadersRead"


def readers(roles: Sequence[RoleContract], secret_logical_id: str) -> list[str]:
    """The names of the roles the contract lets read the secret (sorted)."""
    names = {role.role_name for role in roles for grant in role.grants
             if READ_SECRET in grant.actions and ref(secret_logical_id) in grant.resources}
    if None in names:
        raise ValueError(f"a role reading {secret_logical_id} has no fixed name")
    return sorted(n for n in names if n is not None)


def restrict_secret_readers(stack: Stack, roles: Sequence[RoleContract]) -> dict[str, list[str]]:
    """Add the Deny to every secret of ``stack`` some role reads; returns logical id -> readers."""
    restricted: dict[str, list[str]] = {}
    for construct in stack.node.find_all():
        if not isinstance(construct, secretsmanager.Secret):
            continue
        logical_id = stack.resolve(cast(CfnElement, construct.node.default_child).logical_id)
        names = readers(roles, logical_id)
        if not names:
            continue
        arns = [stack.format_arn(service="iam", region="", account=stack.account, resource="role", resource_name=n)
                for n in names]
        construct.add_to_resource_policy(iam.PolicyStatement(
            sid=SID, effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()], actions=[READ_SECRET],
            resources=["*"], conditions={"ArnNotEquals": {"aws:PrincipalArn": arns}}))
        restricted[logical_id] = names
    return restricted

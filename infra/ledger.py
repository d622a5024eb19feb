"""The ledger table: attempts, claims, conversation state (cadencia_shared.ledger
owns its keys; this construct mirrors its ``table_definition()``). Retained on
``cdk destroy``: a ledger of real refunds outlives the stack, and
scripts/limpeza.sh deletes it explicitly and checks it is gone."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from cadencia_shared import ledger as ledger_schema
from cadencia_shared.catalog import LEDGER_TABLE

from .base import Flat, pin
from .contract import LEADING_KEYS, LEADING_KEYS_CONDITION, Ids
from .ledger_kinds import kind_sets

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER,
          "B": dynamodb.AttributeType.BINARY}


class Ledger(Flat):
    def __init__(self, scope: Construct, construct_id: str, *, deletion_protection: bool,
                 keep_retired_indexes: tuple[str, ...] = ()) -> None:
        """``keep_retired_indexes``: retired indexes (``RETIRED_INDEXES``) kept for one
        deploy (CloudFormation creates or deletes one GSI per update:
        docs/infrastructure.md, *Migrating the ledger's indexes*)."""
        super().__init__(scope, construct_id)
        definition = ledger_schema.table_definition(LEDGER_TABLE, retired_indexes=keep_retired_indexes)
        types = {a["AttributeName"]: _TYPES[a["AttributeType"]] for a in definition["AttributeDefinitions"]}

        def attribute(name: str) -> dynamodb.Attribute:
            return dynamodb.Attribute(name=name, type=types[name])

        (hash_key,) = [k["AttributeName"] for k in definition["KeySchema"] if k["KeyType"] == "HASH"]
        self.table = dynamodb.Table(
            self, "Ledger",
            table_name=definition["TableName"],
            partition_key=attribute(hash_key),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            time_to_live_attribute=ledger_schema.TTL_ATTRIBUTE,
            removal_policy=RemovalPolicy.RETAIN,
            deletion_protection=deletion_protection,
        )
        for gsi in definition["GlobalSecondaryIndexes"]:
            keys = {k["KeyType"]: k["AttributeName"] for k in gsi["KeySchema"]}
            self.table.add_global_secondary_index(
                index_name=gsi["IndexName"],
                partition_key=attribute(keys["HASH"]),
                sort_key=attribute(keys["RANGE"]) if "RANGE" in keys else None,
                projection_type=dynamodb.ProjectionType(gsi["Projection"]["ProjectionType"]),
                non_key_attributes=gsi["Projection"].get("NonKeyAttributes"),
            )
        pin(self.table, Ids.LEDGER)

    def index_arn(self, index_name: str) -> str:
        return f"{self.table.table_arn}/index/{index_name}"


def ledger_statements(role_logical_id: str, ledger_arn: str) -> list[iam.PolicyStatement]:
    """A role's ledger statements, one per action set of its row in
    ``infra/ledger_kinds.py``, each limited to its kinds' keys by ``dynamodb:LeadingKeys``.
    A role without a row gets none: its code has no business in the ledger."""
    return [iam.PolicyStatement(actions=list(actions), resources=[ledger_arn],
                                conditions={LEADING_KEYS_CONDITION: {LEADING_KEYS: list(patterns)}})
            for actions, patterns in kind_sets(role_logical_id)]

"""The orchestrator: the Lambda that runs the loop and its gates (outside the VPC:
it needs DynamoDB, Lambda and the model API only, and this way needs no NAT for
the model's traffic), its dead-letter queue, and the model's credentials (the
Anthropic API key secret, or Bedrock's model ARNs)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cadencia_shared.catalog import ORCHESTRATOR_FUNCTION_NAME, TOOLS

from .approvals import approval_environment
from .base import Flat, FunctionSpec, LambdaFunction, acknowledge, lambda_role, pin
from .config import ANTHROPIC_KEY_SECRET_NAME, StackConfig
from .contract import Ids
from .ledger import Ledger, ledger_statements
from .packaging import BuiltAsset
from .tool_function import ToolFunction

ORCHESTRATOR_TIMEOUT_S = 90
RETRY_CEILING = 4


def bedrock_arns(stack: Stack, config: StackConfig) -> tuple[str, ...]:
    """The inference profile (when the id names one) and the foundation model in
    every region it may route to."""
    arns = []
    if config.model_is_inference_profile:
        arns.append(stack.format_arn(service="bedrock", resource="inference-profile", resource_name=config.model_id))
        regions: Sequence[str] = config.bedrock_regions
    else:
        regions = (stack.region,)
    for region in regions:
        arns.append(stack.format_arn(service="bedrock", region=region, account="", resource="foundation-model",
                                     resource_name=config.foundation_model_id))
    return tuple(arns)


def tool_invocation_environment(config: StackConfig) -> dict[str, str]:
    """What every turn runner (this orchestrator, the WhatsApp consumer) reads: the
    model, the ceiling and the tools' Lambdas, from the registry."""
    return {
        "MODEL_PROVIDER": config.model_provider,
        "MODEL_ID": config.model_id,
        "TETO_TENTATIVAS": str(RETRY_CEILING),
        "TOOL_INVOKER": "aws",
        "TOOL_FUNCTIONS": json.dumps({t.name: t.function_name for t in TOOLS.values()}, sort_keys=True),
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }


class Orchestrator(Flat):
    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig,
                 assets: Mapping[str, BuiltAsset], ledger: Ledger, tools: Sequence[ToolFunction]) -> None:
        super().__init__(scope, construct_id)
        parts = LambdaFunction(
            self, role=lambda_role(self, Ids.ORCHESTRATOR_ROLE, "cadencia-orquestrador-role",
                                   "Orchestrator: ledger items, the three tools, the model", in_vpc=False),
            log_group_id=Ids.ORCHESTRATOR_LOG_GROUP, function_name=ORCHESTRATOR_FUNCTION_NAME)
        self.role = parts.role
        for statement in ledger_statements(Ids.ORCHESTRATOR_ROLE, ledger.table.table_arn):  # infra/ledger_kinds.py
            parts.role.add_to_policy(statement)
        # Unqualified ARNs only (grant_invoke would add "<arn>:*" for every version/alias).
        parts.allow(["lambda:InvokeFunction"], [tool.function_arn for tool in tools])
        env = {**tool_invocation_environment(config), "LEDGER_TABLE": ledger.table.table_name,
               **approval_environment(config)}  # the confirmation gate's policy
        self.anthropic_key: secretsmanager.Secret | None = None
        if config.uses_bedrock:
            parts.allow(["bedrock:InvokeModel"], bedrock_arns(Stack.of(self), config))
        else:
            self.anthropic_key = self._anthropic_key()
            parts.allow(["secretsmanager:GetSecretValue"], [self.anthropic_key.secret_arn])
            env["ANTHROPIC_API_KEY_SECRET_NAME"] = ANTHROPIC_KEY_SECRET_NAME
        self.dlq = sqs.Queue(
            self, "OrchestratorDlqResource",
            queue_name="cadencia-orquestrador-dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        pin(self.dlq, Ids.ORCHESTRATOR_DLQ)
        self.function: lambda_.Function = parts.build(FunctionSpec(
            logical_id=Ids.ORCHESTRATOR_FUNCTION,
            description="Orchestrator: the model proposes, the code decides (Lab 87)",
            handler="orchestrator.handler.lambda_handler",
            timeout=Duration.seconds(ORCHESTRATOR_TIMEOUT_S),
            memory_size=1024,
            environment=env,
            reserved_concurrency=config.orchestrator_concurrency if config.reserved_concurrency else None,
            dead_letter_queue=self.dlq,
            retry_attempts=2,  # the inbound-message record makes a redelivery idempotent
            max_event_age=Duration.hours(1),
        ), assets)

    def _anthropic_key(self) -> secretsmanager.Secret:
        key = secretsmanager.Secret(
            self, "AnthropicApiKeySecretResource",
            secret_name=ANTHROPIC_KEY_SECRET_NAME,
            description="Anthropic API key (plain text) for cadencia-orquestrador",
            generate_secret_string=secretsmanager.SecretStringGenerator(exclude_punctuation=True,
                                                                       password_length=48),
            removal_policy=RemovalPolicy.DESTROY,
        )
        pin(key, Ids.ANTHROPIC_SECRET)
        acknowledge(key, "AwsSolutions-SMG4", "An Anthropic API key is issued in the Anthropic console; it is "
                    "rotated there and written here. Secrets Manager cannot mint it.")
        return key

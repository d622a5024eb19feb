"""The logical ids the stack pins and the contract refers to. A pinned id is
what CloudFormation knows a resource by: renaming one replaces the resource."""

from __future__ import annotations

from typing import Any


def pascal(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def _stem(tool: Any) -> str:
    """A tool's package name (given as the name, or as anything with ``.package``)."""
    return tool if isinstance(tool, str) else tool.package


class Ids:
    """Logical ids the stack pins and the contract refers to."""

    LEDGER = "LedgerTable"
    AUDIT_TABLE = "AuditTable"
    GATEWAY_SECRET = "GatewaySecret"
    ANTHROPIC_SECRET = "AnthropicApiKeySecret"
    CLUSTER = "DbCluster"
    CLUSTER_SECRET_ATTACHMENT = "DbMasterSecretAttachment"
    DB_USERS = "DbUsers"
    DB_USERS_FUNCTION = "DbUsersFunction"
    DB_USERS_ROLE = "DbUsersRole"
    DB_USERS_LOG_GROUP = "DbUsersLogGroup"
    ORCHESTRATOR_FUNCTION = "OrchestratorFunction"
    ORCHESTRATOR_ROLE = "OrchestratorRole"
    ORCHESTRATOR_LOG_GROUP = "OrchestratorLogGroup"
    ORCHESTRATOR_DLQ = "OrchestratorDlq"
    FLOW_LOG_ROLE = "VpcFlowLogRole"
    FLOW_LOG_GROUP = "VpcFlowLogGroup"
    DYNAMODB_ENDPOINT = "DynamoDbEndpoint"
    RECONCILER_FUNCTION = "RefundReconcilerFunction"
    RECONCILER_ROLE = "RefundReconcilerRole"
    RECONCILER_LOG_GROUP = "RefundReconcilerLogGroup"
    RECONCILER_SCHEDULE = "RefundReconcilerSchedule"
    DECISION_FUNCTION = "ApprovalDecisionFunction"
    DECISION_ROLE = "ApprovalDecisionRole"
    DECISION_LOG_GROUP = "ApprovalDecisionLogGroup"
    APPROVAL_EXPIRY_SCHEDULE = "ApprovalExpirySchedule"
    HANDOFF_BUS = "HandoffBus"
    HANDOFF_QUEUE = "HandoffQueue"
    HANDOFF_RULE = "HandoffRule"
    WHATSAPP_APP_SECRET = "WhatsAppAppSecret"
    WHATSAPP_VERIFY_TOKEN = "WhatsAppVerifyToken"
    WHATSAPP_ACCESS_TOKEN = "WhatsAppAccessToken"
    WHATSAPP_QUEUE_KEY = "WhatsAppQueueKey"
    WHATSAPP_QUEUE = "WhatsAppQueue"
    WHATSAPP_DLQ = "WhatsAppDlq"
    WHATSAPP_RESEND_QUEUE = "WhatsAppResendQueue"
    WHATSAPP_INGRESS_FUNCTION = "WhatsAppIngressFunction"
    WHATSAPP_INGRESS_ROLE = "WhatsAppIngressRole"
    WHATSAPP_INGRESS_LOG_GROUP = "WhatsAppIngressLogGroup"
    WHATSAPP_CONSUMER_FUNCTION = "WhatsAppConsumerFunction"
    WHATSAPP_CONSUMER_ROLE = "WhatsAppConsumerRole"
    WHATSAPP_CONSUMER_LOG_GROUP = "WhatsAppConsumerLogGroup"
    WHATSAPP_HUMAN_REPLY_FUNCTION = "WhatsAppHumanReplyFunction"
    WHATSAPP_HUMAN_REPLY_ROLE = "WhatsAppHumanReplyRole"
    WHATSAPP_HUMAN_REPLY_LOG_GROUP = "WhatsAppHumanReplyLogGroup"
    OPERATOR_POOL = "OperatorUserPool"
    OPERATOR_POOL_CLIENT = "OperatorConsoleClient"
    OPERATOR_API = "OperatorApi"
    OPERATOR_API_LOG_GROUP = "OperatorApiAccessLogs"
    CONSOLE_AUTHORIZER = "ConsoleCookieAuthorizer"
    CONSOLE_AUTHORIZER_FUNCTION = "ConsoleAuthorizerFunction"
    CONSOLE_AUTHORIZER_ROLE = "ConsoleAuthorizerRole"
    CONSOLE_AUTHORIZER_LOG_GROUP = "ConsoleAuthorizerLogGroup"

    # A tool's resources are named after its package: ``EmitirReembolsoFunction``...
    @staticmethod
    def function(tool: Any) -> str:
        return f"{pascal(_stem(tool))}Function"

    @staticmethod
    def role(tool: Any) -> str:
        return f"{pascal(_stem(tool))}Role"

    @staticmethod
    def log_group(tool: Any) -> str:
        return f"{pascal(_stem(tool))}LogGroup"

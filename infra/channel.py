"""The WhatsApp channel's resources, added to the stack by ``add_whatsapp_channel``.

    Meta ──HTTPS──► Function URL ─► cadencia-canal-whatsapp-entrada (VPC, its own DB user)
                                      └─ sqs:SendMessage ─► cadencia-whatsapp-entrada.fifo ─(5 receives)─► DLQ (alarm)
    event source mapping (batch 1, ReportBatchItemFailures) ─► cadencia-orquestrador-whatsapp
                                      └─ the same turn as cadencia-orquestrador, then POST /{phone-number-id}/messages
    a temporary refusal, quick attempts used up ─► cadencia-whatsapp-reenvios (DelaySeconds, doubling) ─► the same
                                      function (a second mapping) resends the outbox record, until the 24 h
                                      window closes
    cadencia-orquestrador (a decided approval's message to a WhatsApp customer) ─► the outbox + the resend queue
    scripts/atendente.py responder ─► cadencia-resposta-atendente (a person's reply; the same outbox and sender)

Every role is written out in ``infra/contract.py``; the statements here are
written independently (no ``grant_*`` helper: ``queue.grant_consume_messages``
would add ``sqs:ChangeMessageVisibility`` and ``sqs:GetQueueUrl``, which the
event source mapping does not need).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs

from cadencia_shared.catalog import HANDOFF_BUS_NAME, LEDGER_TABLE, TOOLS, WHATSAPP_DB_USER
from cadencia_shared.observability import NAMESPACE
from canal_whatsapp.queue_timing import queue_timing
from canal_whatsapp.resends import UNSENT_AGE_METRIC
from canal_whatsapp.settings import (
    ACCESS_TOKEN_NAME,
    APP_SECRET_NAME,
    HUMAN_REPLY_FUNCTION_NAME,
    INBOUND_QUEUE_NAME,
    INGRESS_FUNCTION_NAME,
    RESEND_QUEUE_NAME,
    VERIFY_TOKEN_NAME,
)
from orchestrator.settings import OrchestratorSettings

from . import contract
from .config import ANTHROPIC_KEY_SECRET_NAME
from .contract import Ids
from .ledger import ledger_statements

if TYPE_CHECKING:
    from .stack import CadenciaStack

CONSUMER_FUNCTION_NAME = contract.WHATSAPP_CONSUMER_FUNCTION_NAME
INGRESS_TIMEOUT_S = 10
# The consumer's conversation lease (the orchestrator's default, written into its
# environment): the inbound queue's visibility and receives are derived from it.
CONSUMER_LEASE_S: int = OrchestratorSettings.model_fields["conversation_lease_s"].default
# A reply is sent inside the turn's invocation: keep room for one send (its
# 5 s timeout + 1 s) besides the orchestrator's usual reserve.
CONSUMER_FINAL_RESERVE_S = 10
# A person's reply: the conversation's commit, then the bounded send (3 attempts of
# at most 5 s, backoff 0.5 s + 1 s) with room to spare; a send never starts without
# its timeout + 1 s left (the person runs the command again to finish it).
HUMAN_REPLY_TIMEOUT_S = 30
FAILED_SEND_REASONS = ("recusado", "tentativas", "janela_encerrada", "sem_resposta", "fora_da_janela",
                       "remetente_interrompido", "nao_agendado")
# A reply not sent this long after it was recorded (the Cloud API keeps refusing): alarmed.
UNSENT_REPLY_ALARM_S = 15 * 60
RESEND_BASE_S = 30

_SECRET_PLACEHOLDER = ("A random placeholder value that no caller accepts: the deployer writes the real value "
                       "(Meta app settings) after the first deploy; Secrets Manager cannot mint or rotate it.")


def add_whatsapp_channel(stack: CadenciaStack) -> None:
    secrets = {key: _secret(stack, logical_id, name, description) for key, logical_id, name, description in (
        ("app", Ids.WHATSAPP_APP_SECRET, APP_SECRET_NAME, "Meta App Secret: verifies X-Hub-Signature-256"),
        ("verify", Ids.WHATSAPP_VERIFY_TOKEN, VERIFY_TOKEN_NAME, "Webhook verify token (hub.verify_token)"),
        ("access", Ids.WHATSAPP_ACCESS_TOKEN, ACCESS_TOKEN_NAME, "Cloud API access token (system user)"),
    )}
    dlq = _queue(stack, Ids.WHATSAPP_DLQ, INBOUND_QUEUE_NAME.replace(".fifo", "-dlq.fifo"), None)
    queue = _queue(stack, Ids.WHATSAPP_QUEUE, INBOUND_QUEUE_NAME, dlq)
    resends = _resend_queue(stack)
    ingress = _ingress(stack, queue, secrets)
    consumer = _consumer(stack, queue, resends, secrets["access"])
    # A decided approval's message to a WhatsApp customer: recorded in the outbox by the
    # resume (cadencia-orquestrador), sent by the consumer (which holds the token).
    stack.orchestrator.add_to_role_policy(
        iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[resends.queue_arn]))
    stack.orchestrator.add_environment("WHATSAPP_RESEND_QUEUE_URL", resends.queue_url)
    stack.whatsapp_human_reply = _human_reply(stack, secrets["access"])
    _alarms(stack, dlq, [INGRESS_FUNCTION_NAME, CONSUMER_FUNCTION_NAME, HUMAN_REPLY_FUNCTION_NAME])
    _resend_alarms(stack, resends)
    url = ingress.add_function_url(auth_type=lambda_.FunctionUrlAuthType.NONE)
    CfnOutput(stack, "WhatsAppWebhookUrl", value=url.url, description="Callback URL for the Meta app's webhook")
    for key, secret in secrets.items():
        CfnOutput(stack, f"WhatsApp{key.capitalize()}SecretArn", value=secret.secret_arn)
    stack.whatsapp_consumer = consumer


def _secret(stack: CadenciaStack, logical_id: str, name: str, description: str) -> secretsmanager.Secret:
    secret = secretsmanager.Secret(
        stack, logical_id + "Resource", secret_name=name, description=description,
        generate_secret_string=secretsmanager.SecretStringGenerator(exclude_punctuation=True, password_length=48),
        removal_policy=RemovalPolicy.DESTROY,
    )
    stack.pin(secret, logical_id)
    stack.ack(secret, "AwsSolutions-SMG4", _SECRET_PLACEHOLDER)
    return secret


def _queue(stack: CadenciaStack, logical_id: str, name: str, dlq: sqs.Queue | None) -> sqs.Queue:
    timing = queue_timing(turn_timeout_s=stack.orchestrator_timeout_s, lease_s=CONSUMER_LEASE_S)
    queue = sqs.Queue(
        stack, logical_id + "Resource", queue_name=name, fifo=True, content_based_deduplication=False,
        encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
        retention_period=Duration.days(4 if dlq else 14),
        # Derived from the lease: a message never runs out of receives while a consumer
        # that died mid-turn still holds its conversation (6 x the timeout, AWS's advice).
        visibility_timeout=Duration.seconds(timing.visibility_s),
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=timing.max_receives) if dlq else None,
    )
    stack.pin(queue, logical_id)  # (cdk-nag's SQS3 recognises the DLQ as one: nothing to acknowledge)
    return queue


def _resend_queue(stack: CadenciaStack) -> sqs.Queue:
    """Standard (per-message DelaySeconds; FIFO has none): a resend names an outbox
    record, whose claim keeps the send at most once whatever the queue delivers twice."""
    timing = queue_timing(turn_timeout_s=stack.orchestrator_timeout_s, lease_s=CONSUMER_LEASE_S)
    queue = sqs.Queue(stack, Ids.WHATSAPP_RESEND_QUEUE + "Resource", queue_name=RESEND_QUEUE_NAME,
                      encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
                      retention_period=Duration.days(4), visibility_timeout=Duration.seconds(timing.visibility_s))
    stack.pin(queue, Ids.WHATSAPP_RESEND_QUEUE)
    stack.ack(queue, "AwsSolutions-SQS3", "A resend that cannot be processed stays in this queue and its age is "
              "alarmed (ApproximateAgeOfOldestMessage); each successful step re-enqueues a fresh message, so an old "
              "one is a stuck reply a person must answer, which a dead-letter queue would only move.")
    return queue


def _ingress(stack: CadenciaStack, queue: sqs.Queue, secrets: dict[str, secretsmanager.Secret]) -> lambda_.Function:
    role = stack.role(Ids.WHATSAPP_INGRESS_ROLE, contract.WHATSAPP_INGRESS_ROLE_NAME,
                      "WhatsApp webhook: its DB user, the inbound queue, the App Secret and verify token", in_vpc=True)
    log_group = stack.log_group(Ids.WHATSAPP_INGRESS_LOG_GROUP, INGRESS_FUNCTION_NAME)
    role.add_to_policy(iam.PolicyStatement(actions=list(contract.LOG_ACTIONS), resources=[log_group.log_group_arn]))
    stack.cluster_for_grants.grant_connect(role, WHATSAPP_DB_USER)
    role.add_to_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn]))
    role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"],
                                           resources=[secrets["app"].secret_arn, secrets["verify"].secret_arn]))
    sg = ec2.SecurityGroup(stack, "WhatsAppIngressSecurityGroup", vpc=stack.vpc, allow_all_outbound=False,
                           description=f"{INGRESS_FUNCTION_NAME}: egress to PostgreSQL and HTTPS "
                                       "(SQS, Secrets Manager)")
    sg.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS via the NAT (SQS, Secrets Manager)")
    stack.allow_database_from(sg)
    env = {**stack.db_environment(INGRESS_FUNCTION_NAME, WHATSAPP_DB_USER),  # verify-full TLS, its own user
           "WHATSAPP_QUEUE_URL": queue.queue_url, "WHATSAPP_APP_SECRET_NAME": APP_SECRET_NAME,
           "WHATSAPP_VERIFY_TOKEN_NAME": VERIFY_TOKEN_NAME}
    fn = _function(
        stack, Ids.WHATSAPP_INGRESS_FUNCTION, INGRESS_FUNCTION_NAME, "canal_whatsapp.handler.lambda_handler",
        description="WhatsApp webhook: signature, identity, ordered queue", role=role, log_group=log_group,
        timeout=Duration.seconds(INGRESS_TIMEOUT_S), memory_size=512, environment=env,
        vpc=stack.vpc, vpc_subnets=stack.with_egress, security_groups=[sg],
        # The URL is public: its concurrency is bounded so a flood of forged requests
        # (each answered 401) cannot take the account's concurrency.
        reserved_concurrent_executions=stack.config.ingress_concurrency if stack.config.reserved_concurrency else None,
    )
    if stack.db_users is not None:
        fn.node.add_dependency(stack.db_users)
        role.node.add_dependency(stack.db_users)
    return fn


def _consumer(stack: CadenciaStack, queue: sqs.Queue, resends: sqs.Queue,
              access_token: secretsmanager.Secret) -> lambda_.Function:
    cfg = stack.config
    role = stack.role(Ids.WHATSAPP_CONSUMER_ROLE, contract.WHATSAPP_CONSUMER_ROLE_NAME,
                      "Orchestrator for WhatsApp: ledger items, the three tools, the model, the queue, the Cloud API "
                      "token", in_vpc=False)
    log_group = stack.log_group(Ids.WHATSAPP_CONSUMER_LOG_GROUP, CONSUMER_FUNCTION_NAME)
    statements = [
        (contract.LOG_ACTIONS, [log_group.log_group_arn]),
        (("lambda:InvokeFunction",), [stack.tool_functions[t.name].function_arn for t in TOOLS.values()]),
        (("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"), [queue.queue_arn]),
        (("sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"),
         [resends.queue_arn]),
        (("secretsmanager:GetSecretValue",), [access_token.secret_arn]),
        # Hand-offs and approval requests of WhatsApp conversations reach a person as every other's do.
        (("events:PutEvents",), [stack.handoff_bus.event_bus_arn]),
    ]
    env = {"EVENT_BUS_NAME": HANDOFF_BUS_NAME, "MODEL_PROVIDER": cfg.model_provider, "MODEL_ID": cfg.model_id,
           "LEDGER_TABLE": LEDGER_TABLE,
           "TETO_TENTATIVAS": stack.retry_ceiling, "TOOL_INVOKER": "aws",
           "TOOL_FUNCTIONS": json.dumps({t.name: t.function_name for t in TOOLS.values()}, sort_keys=True),
           "RESERVA_FINAL_S": str(CONSUMER_FINAL_RESERVE_S), "WHATSAPP_ACCESS_TOKEN_NAME": ACCESS_TOKEN_NAME,
           "CONVERSA_LEASE_S": str(CONSUMER_LEASE_S), "WHATSAPP_RESEND_QUEUE_URL": resends.queue_url,
           "WHATSAPP_RESEND_BASE_S": str(RESEND_BASE_S),
           "POWERTOOLS_LOG_LEVEL": "INFO"}
    if cfg.uses_bedrock:
        statements.append((("bedrock:InvokeModel",), list(stack.bedrock_arns())))
    else:
        statements.append((("secretsmanager:GetSecretValue",), [stack.anthropic_key_arn]))
        env["ANTHROPIC_API_KEY_SECRET_NAME"] = ANTHROPIC_KEY_SECRET_NAME
    _allow(role, statements)
    for statement in ledger_statements(Ids.WHATSAPP_CONSUMER_ROLE, stack.ledger.table_arn):  # infra/ledger_kinds.py
        role.add_to_policy(statement)
    fn = _function(
        stack, Ids.WHATSAPP_CONSUMER_FUNCTION, CONSUMER_FUNCTION_NAME, "orchestrator.whatsapp_consumer.lambda_handler",
        description="Orchestrator for the WhatsApp queue: one turn, then the reply out exactly once",
        role=role, log_group=log_group, timeout=Duration.seconds(stack.orchestrator_timeout_s), memory_size=1024,
        environment=env,
        reserved_concurrent_executions=cfg.orchestrator_concurrency if cfg.reserved_concurrency else None,
    )
    mapping = lambda_.EventSourceMapping(
        stack, "WhatsAppQueueMapping", target=fn, event_source_arn=queue.queue_arn, batch_size=1,
        report_batch_item_failures=True)
    # Lambda checks the role's permissions when the mapping is created.
    mapping.node.add_dependency(role)
    resend_mapping = lambda_.EventSourceMapping(
        stack, "WhatsAppResendMapping", target=fn, event_source_arn=resends.queue_arn, batch_size=1,
        report_batch_item_failures=True)
    resend_mapping.node.add_dependency(role)
    return fn


def _human_reply(stack: CadenciaStack, access_token: secretsmanager.Secret) -> lambda_.Function:
    role = stack.role(Ids.WHATSAPP_HUMAN_REPLY_ROLE, contract.WHATSAPP_HUMAN_REPLY_ROLE_NAME,
                      "A person's reply: the conversation, its outbox record, the Cloud API token", in_vpc=False)
    log_group = stack.log_group(Ids.WHATSAPP_HUMAN_REPLY_LOG_GROUP, HUMAN_REPLY_FUNCTION_NAME)
    _allow(role, [
        (contract.LOG_ACTIONS, [log_group.log_group_arn]),
        (("secretsmanager:GetSecretValue",), [access_token.secret_arn]),
    ])
    for statement in ledger_statements(Ids.WHATSAPP_HUMAN_REPLY_ROLE, stack.ledger.table_arn):
        role.add_to_policy(statement)
    return _function(
        stack, Ids.WHATSAPP_HUMAN_REPLY_FUNCTION, HUMAN_REPLY_FUNCTION_NAME,
        "orchestrator.human_reply_handler.lambda_handler",
        description="A person's reply to a handed-off conversation: written once, sent through the WhatsApp outbox",
        role=role, log_group=log_group, timeout=Duration.seconds(HUMAN_REPLY_TIMEOUT_S), memory_size=256,
        environment={"LEDGER_TABLE": LEDGER_TABLE, "WHATSAPP_ACCESS_TOKEN_NAME": ACCESS_TOKEN_NAME,
                     "POWERTOOLS_LOG_LEVEL": "INFO"},
        # A person invokes it synchronously: running the command again is the retry.
        retry_attempts=0,
    )


def _allow(role: iam.Role, statements: list[tuple[tuple[str, ...], list[str]]]) -> None:
    for actions, resources in statements:
        role.add_to_policy(iam.PolicyStatement(actions=list(actions), resources=resources))


def _function(stack: CadenciaStack, logical_id: str, name: str, handler: str, **props: Any) -> lambda_.Function:
    """One of the channel's functions: the stack's runtime, its asset, active tracing, a pinned id."""
    fn = lambda_.Function(stack, logical_id + "Resource", function_name=name, handler=handler,
                          runtime=stack.runtime, architecture=stack.architecture, code=stack.code(name),
                          tracing=lambda_.Tracing.ACTIVE, **props)
    stack.pin(fn, logical_id)
    stack.ack(fn, "AwsSolutions-L1", stack.l1_reason)
    return fn


def _resend_alarms(stack: CadenciaStack, resends: sqs.Queue) -> None:
    """The age of the oldest unsent reply: the reply's own age at each deferral, and the
    resend queue's oldest message (a resend that cannot be processed)."""
    age = cw.Metric(namespace=NAMESPACE, metric_name=UNSENT_AGE_METRIC, statistic="Maximum",
                    period=Duration.minutes(5))
    stack.extra_alarms.append(stack.alarm(
        "WhatsAppUnsentReplyAgeAlarm", age,
        "A WhatsApp reply has waited more than 15 minutes for the Cloud API: it is being resent; a person may "
        "want to answer that customer another way.", threshold=UNSENT_REPLY_ALARM_S))
    oldest = resends.metric_approximate_age_of_oldest_message(period=Duration.minutes(5), statistic="Maximum")
    stack.extra_alarms.append(stack.alarm(
        "WhatsAppResendQueueAgeAlarm", oldest,
        "A WhatsApp resend has not been processed for 30 minutes: its customer's reply is stuck.",
        threshold=2 * UNSENT_REPLY_ALARM_S))


def _alarms(stack: CadenciaStack, dlq: sqs.Queue, function_names: list[str]) -> None:
    """The channel's alarms, all in ``stack.extra_alarms``: the alarm topic's policy
    lets CloudWatch publish only for the alarms it lists."""
    alarms = stack.extra_alarms
    alarms.append(stack.alarm("WhatsAppDlqAlarm", dlq.metric_approximate_number_of_messages_visible(
        period=Duration.minutes(5), statistic="Maximum"),
        "A WhatsApp message failed every attempt and waits in the dead-letter queue: its customer got no reply."))
    for reason in FAILED_SEND_REASONS:
        metric = cw.Metric(namespace=NAMESPACE, metric_name="EnviosWhatsappFalhos", dimensions_map={"Motivo": reason},
                           statistic="Sum", period=Duration.minutes(5))
        alarms.append(stack.alarm(f"WhatsAppSendFailed{contract.pascal(reason)}Alarm", metric,
                                  f"A WhatsApp reply was not sent ({reason}): a person must answer that customer."))
    for name in function_names:
        p = contract.pascal(name.removeprefix("cadencia-").replace("-", "_"))
        for metric_name in ("Errors", "Throttles"):
            metric = cw.Metric(namespace="AWS/Lambda", metric_name=metric_name, dimensions_map={"FunctionName": name},
                               statistic="Sum", period=Duration.minutes(5))
            alarms.append(stack.alarm(f"{p}{metric_name}Alarm", metric, f"{name}: {metric_name} in 5 minutes"))

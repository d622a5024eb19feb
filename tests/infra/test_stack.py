"""What the synthesized template promises besides IAM: names, handlers, runtime,
environment, ledger, database, network, observability, teardown order."""

from __future__ import annotations

import json

import pytest

from cadencia_shared import ledger
from cadencia_shared.catalog import (
    DATABASE_NAME,
    EMITIR_REEMBOLSO,
    GATEWAY_SECRET_NAME,
    LEDGER_TABLE,
    ORCHESTRATOR_FUNCTION_NAME,
    TOOLS,
)
from cadencia_shared.observability import NAMESPACE, TOOL_DIMENSION, Metric
from infra import contract
from infra.contract import Ids
from infra.policy_check import render

pytestmark = pytest.mark.infra


def _props(synth, logical_id):
    return synth.resources[logical_id]["Properties"]


def test_ledger_table_mirrors_the_ledger_module(default_synth):
    table = synth_table = default_synth.resources[Ids.LEDGER]
    props = table["Properties"]
    want = ledger.table_definition(LEDGER_TABLE)
    assert props["TableName"] == LEDGER_TABLE
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == want["KeySchema"]
    assert sorted(props["AttributeDefinitions"], key=str) == sorted(want["AttributeDefinitions"], key=str)
    assert [{k: g[k] for k in ("IndexName", "KeySchema", "Projection")} for g in props["GlobalSecondaryIndexes"]] \
        == want["GlobalSecondaryIndexes"]
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["TimeToLiveSpecification"] == {"AttributeName": ledger.TTL_ATTRIBUTE, "Enabled": True}
    assert props["DeletionProtectionEnabled"] is True
    # A ledger outlives the stack; scripts/limpeza.sh deletes it explicitly.
    assert synth_table["DeletionPolicy"] == synth_table["UpdateReplacePolicy"] == "Retain"


def test_tool_functions_names_handlers_runtime_and_environment(default_synth):
    for tool in TOOLS.values():
        props = _props(default_synth, Ids.function(tool))
        assert props["FunctionName"] == tool.function_name
        assert props["Handler"] == tool.handler
        assert props["Runtime"] == "python3.12" and props["Architectures"] == ["arm64"]
        assert props["Timeout"] == tool.timeout_s  # the orchestrator's per-call budget (the registry row)
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"] == {"LogGroup": {"Ref": Ids.log_group(tool)}}
        env = props["Environment"]["Variables"]
        expected = {"DB_HOST", "DB_PORT", "DB_NAME", "DB_USER", "DB_AUTH", "POWERTOOLS_LOG_LEVEL",
                    "DB_SSL_MODE", "DB_SSL_ROOT_CERT"}
        # Every tool knows the table: its edge verifies each call's SEAL envelope there (docs/seal.md).
        expected.add("LEDGER_TABLE")
        if tool.appends_audit:
            expected.add("AUDIT_TABLE")
        if tool.calls_payment_gateway:
            expected |= {"GATEWAY_URL", "GATEWAY_SECRET_NAME", "GATEWAY_TIMEOUT_S", "REFUND_CLAIM_LEASE_S",
                         "GATEWAY_IDEMPOTENCY_WINDOW_H"}
        if tool is EMITIR_REEMBOLSO:
            assert env["GATEWAY_SECRET_NAME"] == GATEWAY_SECRET_NAME
            assert 0 < float(env["GATEWAY_IDEMPOTENCY_WINDOW_H"]) < 24  # under Stripe's 24 h key retention
            assert int(env["REFUND_CLAIM_LEASE_S"]) > props["Timeout"]
            assert float(env["GATEWAY_TIMEOUT_S"]) < props["Timeout"]
        assert set(env) == expected  # no POWERTOOLS_SERVICE_NAME
        assert env["DB_USER"] == tool.db_user and env["DB_AUTH"] == "iam" and env["DB_NAME"] == DATABASE_NAME
        assert "VpcConfig" in props
        assert props["ReservedConcurrentExecutions"] >= 1


def test_tools_are_never_retried_asynchronously(default_synth):
    configs = {c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
               for c in default_synth.of_type("AWS::Lambda::EventInvokeConfig").values()}
    for tool in TOOLS.values():
        assert configs[Ids.function(tool)]["MaximumRetryAttempts"] == 0
    assert configs[Ids.ORCHESTRATOR_FUNCTION]["MaximumRetryAttempts"] == 2


def test_orchestrator(default_synth, variant_synth):
    props = _props(default_synth, Ids.ORCHESTRATOR_FUNCTION)
    env = props["Environment"]["Variables"]
    assert props["Handler"] == "orchestrator.handler.lambda_handler"
    assert "VpcConfig" not in props  # DynamoDB, Lambda and the model API only: no NAT for model traffic
    assert json.loads(env["TOOL_FUNCTIONS"]) == {t.name: t.function_name for t in TOOLS.values()}
    assert env["TOOL_INVOKER"] == "aws" and env["TETO_TENTATIVAS"] == "4"
    assert env["MODEL_PROVIDER"] == "anthropic" and env["ANTHROPIC_API_KEY_SECRET_NAME"]
    assert env["LEDGER_TABLE"] == {"Ref": Ids.LEDGER}
    assert "POWERTOOLS_SERVICE_NAME" not in env
    assert props["DeadLetterConfig"] == {"TargetArn": {"Fn::GetAtt": [Ids.ORCHESTRATOR_DLQ, "Arn"]}}
    assert props["Timeout"] == 90

    bedrock_env = _props(variant_synth, Ids.ORCHESTRATOR_FUNCTION)["Environment"]["Variables"]
    assert bedrock_env["MODEL_PROVIDER"] == "bedrock" and "ANTHROPIC_API_KEY_SECRET_NAME" not in bedrock_env
    assert bedrock_env["MODEL_ID"] == variant_synth.config.model_id


def test_secrets(default_synth, variant_synth):
    secrets = {r["Properties"]["Name"] for r in default_synth.of_type("AWS::SecretsManager::Secret").values()}
    assert GATEWAY_SECRET_NAME in secrets and "cadencia/anthropic-api-key" in secrets
    gateway = _props(default_synth, Ids.GATEWAY_SECRET)["GenerateSecretString"]
    assert gateway["GenerateStringKey"] == "token" and gateway["SecretStringTemplate"] == "{}"
    variant = {r["Properties"]["Name"] for r in variant_synth.of_type("AWS::SecretsManager::Secret").values()}
    channel = {"cadencia/whatsapp/app-secret", "cadencia/whatsapp/verify-token", "cadencia/whatsapp/access-token",
               "cadencia/whatsapp/queue-key"}
    assert channel <= secrets
    assert variant == {GATEWAY_SECRET_NAME} | channel  # bedrock: no API key; imported: no master secret


def test_demo_database_is_private_with_iam_auth_and_data_api(default_synth):
    cluster = _props(default_synth, Ids.CLUSTER)
    assert cluster["Engine"] == "aurora-postgresql" and cluster["EngineVersion"].startswith("17.")
    assert cluster["EnableIAMDatabaseAuthentication"] is True
    assert cluster["EnableHttpEndpoint"] is True  # RDS Data API, for the DB-users custom resource
    assert cluster["StorageEncrypted"] is True
    assert cluster["DatabaseName"] == DATABASE_NAME
    (instance,) = default_synth.of_type("AWS::RDS::DBInstance").values()
    assert instance["Properties"]["PubliclyAccessible"] is False
    # Its subnets are the isolated ones: no route to an internet or NAT gateway.
    (group,) = default_synth.of_type("AWS::RDS::DBSubnetGroup").values()
    subnets = {s["Ref"] for s in group["Properties"]["SubnetIds"]}
    assocs = {a["Properties"]["SubnetId"]["Ref"]: a["Properties"]["RouteTableId"]["Ref"]
              for a in default_synth.of_type("AWS::EC2::SubnetRouteTableAssociation").values()}
    routes = default_synth.of_type("AWS::EC2::Route").values()
    for subnet in subnets:
        table = assocs[subnet]
        assert not [r for r in routes if r["Properties"]["RouteTableId"]["Ref"] == table], subnet


def test_no_security_group_admits_the_internet(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        ingress = list(synth.of_type("AWS::EC2::SecurityGroupIngress").values())
        for sg in synth.of_type("AWS::EC2::SecurityGroup").values():
            ingress += [{"Properties": r} for r in sg["Properties"].get("SecurityGroupIngress", [])]
        for rule in ingress:
            p = rule["Properties"]
            assert "CidrIp" not in p and "CidrIpv6" not in p, p
            assert p["FromPort"] == p["ToPort"] and p["IpProtocol"] == "tcp"
        # One PostgreSQL rule per tool security group, one for the WhatsApp webhook's, plus
        # (demo cluster) the master-secret rotation function's, which must log in to change
        # the password.
        sources = [render(r["Properties"]["SourceSecurityGroupId"]) for r in ingress]
        tools = [src for src in sources
                 if any(src.startswith(f"${{{contract.pascal(t.package)}SecurityGroup") for t in TOOLS.values())]
        channel = [src for src in sources if src.startswith("${WhatsAppIngressSecurityGroup")]
        rotation = [src for src in sources if src.startswith("${DbRotationSingleUserSecurityGroup")]
        assert len(tools) == len(TOOLS) and len(channel) == 1, sources
        assert len(rotation) == (1 if synth is default_synth else 0), sources
        assert len(sources) == len(tools) + len(channel) + len(rotation)


def test_dynamodb_endpoint_policy_allows_only_what_the_functions_in_the_vpc_call(default_synth):
    endpoint = _props(default_synth, Ids.DYNAMODB_ENDPOINT)
    assert endpoint["VpcEndpointType"] == "Gateway"
    statements = endpoint["PolicyDocument"]["Statement"]
    ledger = {"Fn::GetAtt": [Ids.LEDGER, "Arn"]}

    def keys(stmt):
        return stmt.get("Condition", {}).get("ForAllValues:StringLike", {}).get("dynamodb:LeadingKeys")

    by_target = {(json.dumps(s["Resource"], sort_keys=True), json.dumps(keys(s))): s for s in statements}
    assert len(by_target) == len(statements) == 7, statements

    def actions(stmt):
        return sorted(stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]])

    # SEAL's edge (docs/seal.md): every tool reads its call's session and uses up the envelope;
    # the refund also reads the approval an envelope names and the person's decision on it
    # (decisao#: SEAL's check requires it); every tool reads its kill switch again (a stop that
    # lands after the orchestrator's read). Nothing more of those kinds; read only.
    assert actions(by_target[(json.dumps(ledger), json.dumps(["interruptor#*", "sessao#*"]))]) == ["dynamodb:GetItem"]
    assert actions(by_target[(json.dumps(ledger), json.dumps(["jti#*"]))]) == ["dynamodb:PutItem"]
    approval_reads = json.dumps(["aprovacao#*", "decisao#*", "interruptor#*", "sessao#*"])
    assert actions(by_target[(json.dumps(ledger), approval_reads)]) == ["dynamodb:GetItem"]
    # The profile tool's audit record (isolated subnets: the endpoint is its only way to DynamoDB).
    audit = by_target[(json.dumps({"Fn::GetAtt": [Ids.AUDIT_TABLE, "Arn"]}), "null")]
    assert audit["Action"] == ["dynamodb:PutItem", "dynamodb:Query"]
    # Its chain's head anchor, and nothing else of the ledger (infra/ledger_kinds.py).
    anchor = by_target[(json.dumps(ledger), json.dumps(["auditoria-cabeca#*"]))]
    assert sorted(anchor["Action"]) == ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    # The refund's claim and the reconciler's reads and settles: refund claims only.
    claims = by_target[(json.dumps(ledger), json.dumps(["reivindicacao#*"]))]
    assert sorted(claims["Action"]) == ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
    # The reconciler's one Query, on the sparse index of unsettled refund claims only.
    index = by_target[(json.dumps({"Fn::Join": ["", [ledger, "/index/pendenciasPorVisita"]]}, sort_keys=True),
                       "null")]
    assert index["Action"] == "dynamodb:Query"


def test_db_users_custom_resource_and_the_teardown_order(default_synth):
    resource = default_synth.resources[Ids.DB_USERS]
    props = resource["Properties"]
    # The event names the SQL by digest only; the SQL itself ships in the function's code.
    assert set(props) == {"ServiceToken", "ServiceTimeout", "SqlSha256"}
    env = _props(default_synth, Ids.DB_USERS_FUNCTION)["Environment"]["Variables"]
    assert env["DATABASE"] == DATABASE_NAME
    # Created after the writer instance (the Data API needs it)...
    writer = next(iter(default_synth.of_type("AWS::RDS::DBInstance")))
    assert writer in resource["DependsOn"]
    # ...and every tool function and role depends on it: CloudFormation deletes the
    # functions and roles first, then the users (revoke.sql), then the cluster.
    for tool in TOOLS.values():
        for logical_id in (Ids.function(tool), Ids.role(tool)):
            assert Ids.DB_USERS in default_synth.resources[logical_id]["DependsOn"], logical_id


def test_teardown_phases_remove_functions_then_users(teardown_synths):
    functions = teardown_synths["functions"]
    assert not functions.of_type("AWS::Lambda::Function").keys() - {Ids.DB_USERS_FUNCTION}
    assert Ids.DB_USERS in functions.resources and Ids.LEDGER in functions.resources
    users = teardown_synths["database-users"]
    assert not users.of_type("AWS::Lambda::Function")
    assert Ids.DB_USERS not in users.resources and Ids.CLUSTER in users.resources


def test_log_groups_have_retention_and_are_removed_with_the_stack(default_synth):
    groups = default_synth.of_type("AWS::Logs::LogGroup")
    names = {g["Properties"].get("LogGroupName") for g in groups.values()}
    for name in [t.function_name for t in TOOLS.values()] + [ORCHESTRATOR_FUNCTION_NAME]:
        assert f"/aws/lambda/{name}" in names
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] in (14, 30)
        assert group["DeletionPolicy"] == "Delete"


def _alarm_metrics(synth):
    return [(a["Properties"].get("Namespace"), a["Properties"].get("MetricName"),
             {d["Name"]: d["Value"] for d in a["Properties"].get("Dimensions", [])}, a["Properties"])
            for a in synth.of_type("AWS::CloudWatch::Alarm").values()]


def test_alarms(default_synth):
    alarms = _alarm_metrics(default_synth)
    for tool in TOOLS.values():
        ceiling = [p for ns, m, d, p in alarms
                   if ns == NAMESPACE and m == Metric.CEILING_INTERRUPTIONS and d == {TOOL_DIMENSION: tool.name}]
        assert len(ceiling) == 1, tool.name
        assert ceiling[0]["Threshold"] == 1 and ceiling[0]["AlarmActions"]
    for name in [t.function_name for t in TOOLS.values()] + [ORCHESTRATOR_FUNCTION_NAME]:
        for metric in ("Errors", "Throttles"):
            assert [1 for ns, m, d, _ in alarms if ns == "AWS/Lambda" and m == metric and d == {"FunctionName": name}]
    assert [1 for ns, m, _, _ in alarms if ns == "AWS/SQS" and m == "ApproximateNumberOfMessagesVisible"]


def test_dashboard_shows_the_loop_signals(default_synth):
    (dashboard,) = default_synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (Metric.CEILING_INTERRUPTIONS, Metric.IDEMPOTENCY_BLOCKS, Metric.REAL_REFUNDS, Metric.TOOL_ERRORS):
        assert metric in body
    assert NAMESPACE in body


def test_the_whatsapp_channel(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        [url] = synth.of_type("AWS::Lambda::Url").values()
        assert url["Properties"]["AuthType"] == "NONE"  # Meta's HMAC signature is checked in code
        assert url["Properties"]["TargetFunctionArn"] == {"Fn::GetAtt": [Ids.WHATSAPP_INGRESS_FUNCTION, "Arn"]}
        queue = _props(synth, Ids.WHATSAPP_QUEUE)
        assert queue["FifoQueue"] is True and queue.get("ContentBasedDeduplication") is False
        assert queue["QueueName"] == "cadencia-whatsapp-entrada.fifo"
        assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
        assert queue["VisibilityTimeout"] >= 6 * _props(synth, Ids.WHATSAPP_CONSUMER_FUNCTION)["Timeout"]
        assert _props(synth, Ids.WHATSAPP_DLQ)["FifoQueue"] is True
        mappings = [m["Properties"] for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()]
        for p in mappings:  # the inbound queue and the resend queue, both into the consumer
            assert p["BatchSize"] == 1 and p["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            assert p["FunctionName"] == {"Ref": Ids.WHATSAPP_CONSUMER_FUNCTION}
        assert sorted(p["EventSourceArn"]["Fn::GetAtt"][0] for p in mappings) == sorted(
            [Ids.WHATSAPP_QUEUE, Ids.WHATSAPP_RESEND_QUEUE])
        ingress = _props(synth, Ids.WHATSAPP_INGRESS_FUNCTION)
        assert ingress["Handler"] == "canal_whatsapp.handler.lambda_handler"
        assert ingress["Environment"]["Variables"]["DB_USER"] == "cadencia_canal_whatsapp"
        assert ingress["VpcConfig"]
        consumer = _props(synth, Ids.WHATSAPP_CONSUMER_FUNCTION)
        assert consumer["Handler"] == "orchestrator.whatsapp_consumer.lambda_handler"
        assert "VpcConfig" not in consumer
    alarms = _alarm_metrics(default_synth)
    failed = {d.get("Motivo") for ns, m, d, _ in alarms if ns == NAMESPACE and m == "EnviosWhatsappFalhos"}
    assert failed == {"recusado", "tentativas", "janela_encerrada", "sem_resposta", "fora_da_janela",
                      "remetente_interrompido", "nao_agendado"}
    dlq_alarms = [p for ns, m, d, p in alarms if ns == "AWS/SQS" and d.get("QueueName")
                  and m == "ApproximateNumberOfMessagesVisible"]
    assert len(dlq_alarms) == 2  # the orchestrator's DLQ and the WhatsApp DLQ


def test_the_reconciler_and_the_refund_share_the_idempotency_window_and_it_has_an_alarm(default_synth):
    """Both re-send with the same key, so both stop at the same window; a claim held
    past it is counted, and that count is an alarm naming the manual step."""
    refund = _props(default_synth, Ids.function(EMITIR_REEMBOLSO))["Environment"]["Variables"]
    reconciler = _props(default_synth, Ids.RECONCILER_FUNCTION)["Environment"]["Variables"]
    assert reconciler["GATEWAY_IDEMPOTENCY_WINDOW_H"] == refund["GATEWAY_IDEMPOTENCY_WINDOW_H"] == "23"
    alarms = [a["Properties"] for a in default_synth.of_type("AWS::CloudWatch::Alarm").values()
              if a["Properties"].get("MetricName") == Metric.PAST_IDEMPOTENCY_WINDOW]
    assert len(alarms) == 1 and "by hand" in alarms[0]["AlarmDescription"]
    assert alarms[0]["Dimensions"] == [{"Name": TOOL_DIMENSION, "Value": EMITIR_REEMBOLSO.name}]
    assert alarms[0]["Threshold"] == 1 and alarms[0]["Namespace"] == NAMESPACE

"""Deploy safety, read on the synthesized template: alarms that can publish, TLS
that authenticates the database, a parameter group that refuses plain text, and a
DB-users custom resource that cannot be steered by its event."""

from __future__ import annotations

import pytest

from cadencia_shared.catalog import TOOLS
from infra import contract
from infra.contract import Ids
from infra.packaging import RDS_CA_BUNDLE_NAME
from infra.policy_check import render

pytestmark = pytest.mark.infra


def _topic_statements(synth):
    (policy,) = synth.of_type("AWS::SNS::TopicPolicy").values()
    return policy["Properties"]["PolicyDocument"]["Statement"]


@pytest.mark.parametrize("variant", ["default", "bedrock+imported"])
def test_cloudwatch_may_publish_to_the_alarm_topic_only_for_these_alarms(all_synths, variant):
    synth = all_synths[variant]
    statements = _topic_statements(synth)
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}  # plain text still refused
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert allow["Action"] == "sns:Publish"
    (topic_id,) = synth.of_type("AWS::SNS::Topic")
    assert allow["Resource"] == {"Ref": topic_id}
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    source_arns = allow["Condition"]["ArnEquals"]["aws:SourceArn"]
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    # Exactly the stack's alarms, each of which notifies this topic.
    assert sorted(render(a) for a in source_arns) == sorted(f"${{{a}.Arn}}" for a in alarms)
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
    # Per tool: its ceiling, its breaker opening, its Lambda's errors and throttles; then the
    # orchestrator's errors, throttles and DLQ, the unknown refund outcome, the reconciler's 5
    # (the books' audit included) and the WhatsApp channel's 16 (Errors/Throttles of its three
    # functions, a failed-send alarm per reason — janela_encerrada and nao_agendado included — the
    # unsent reply's age and the resend queue's oldest message; 37 with the three tools).
    assert len(alarms) == 4 * len(TOOLS) + 25


def test_the_demo_cluster_refuses_plain_text_connections(default_synth):
    (group_id, group), = default_synth.of_type("AWS::RDS::DBClusterParameterGroup").items()
    assert group["Properties"]["Parameters"]["rds.force_ssl"] == "1"
    assert group["Properties"]["Family"] == "aurora-postgresql17"
    cluster = default_synth.resources[Ids.CLUSTER]["Properties"]
    assert cluster["DBClusterParameterGroupName"] == {"Ref": group_id}
    assert cluster["EnableIAMDatabaseAuthentication"] is True


def test_tools_verify_the_database_server(default_synth):
    for tool in TOOLS.values():
        env = default_synth.resources[Ids.function(tool)]["Properties"]["Environment"]["Variables"]
        assert env["DB_SSL_MODE"] == "verify-full"
        assert env["DB_SSL_ROOT_CERT"] == f"/var/task/{RDS_CA_BUNDLE_NAME}"
        asset = default_synth.stack.assets[tool.function_name]
        assert asset.ca_bundle and (asset.path / RDS_CA_BUNDLE_NAME).is_file()


def test_without_the_bundle_only_the_explicit_opt_out_deploys_and_it_says_so(variant_synth):
    assert variant_synth.config.allow_unverified_db_tls
    for tool in TOOLS.values():
        env = variant_synth.resources[Ids.function(tool)]["Properties"]["Environment"]["Variables"]
        assert env["DB_SSL_MODE"] == "require" and "DB_SSL_ROOT_CERT" not in env


def test_the_master_secret_rotates(default_synth):
    (schedule,) = default_synth.of_type("AWS::SecretsManager::RotationSchedule").values()
    assert schedule["Properties"]["SecretId"] == {"Ref": Ids.CLUSTER_SECRET_ATTACHMENT}
    assert schedule["Properties"]["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
    # Its first rotation (right at creation) must not swap the password under the DB-users
    # resource's Data API calls: it waits for them, and on destroy goes first.
    assert Ids.DB_USERS in schedule["DependsOn"]


def test_the_db_users_function_takes_nothing_but_a_digest_from_its_event(default_synth):
    import json

    props = default_synth.resources[Ids.DB_USERS]["Properties"]
    assert set(props) == {"ServiceToken", "ServiceTimeout", "SqlSha256"}
    fn = default_synth.resources[Ids.DB_USERS_FUNCTION]["Properties"]
    env = fn["Environment"]["Variables"]
    assert env["STACK_ID"] == {"Ref": "AWS::StackId"} and env["LOGICAL_RESOURCE_ID"] == Ids.DB_USERS
    assert render(env["CLUSTER_ARN"]) and render(env["SECRET_ARN"]) == f"${{{Ids.CLUSTER_SECRET_ATTACHMENT}}}"
    # What it ships is what the template names.
    import hashlib

    from infra import db_users

    asset_dir = db_users.build_asset(seed_demo_data=default_synth.config.seed_demo_data).path
    shipped = (asset_dir / "statements.json").read_bytes()
    assert hashlib.sha256(shipped).hexdigest() == props["SqlSha256"]
    assert set(json.loads(shipped)) == {"apply", "revoke"}
    assert sorted(p.name for p in asset_dir.iterdir()) == ["handler.py", "statements.json"]
    configs = [c["Properties"] for c in default_synth.of_type("AWS::Lambda::EventInvokeConfig").values()
               if c["Properties"]["FunctionName"] == {"Ref": Ids.DB_USERS_FUNCTION}]
    assert configs and configs[0]["MaximumRetryAttempts"] == 0  # one answer, never a retried second one


def test_the_db_users_role_is_its_contract(default_synth):
    from infra.policy_check import extract_roles

    pairs = extract_roles(default_synth.template)[Ids.DB_USERS_ROLE].pairs
    assert ("cloudformation:DescribeStackResource", "${AWS::StackId}") in pairs
    assert ("cloudformation:DescribeStacks", "${AWS::StackId}") in pairs  # is a failed create being rolled back?
    assert not [p for p in pairs if p[0].startswith("rds-data:") and p[0] != "rds-data:ExecuteStatement"]
    # No resource-based policy lets anyone else invoke it.
    assert not [p for p in default_synth.of_type("AWS::Lambda::Permission").values()
                if p["Properties"]["FunctionName"] in ({"Ref": Ids.DB_USERS_FUNCTION},
                                                       {"Fn::GetAtt": [Ids.DB_USERS_FUNCTION, "Arn"]})]
    assert contract.db_users_role().grants

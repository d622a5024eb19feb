"""The least-privilege contract, checked on the synthesized templates.

Each role's (action, resource) pairs and managed policies must equal
``infra/contract.py`` exactly; the mutation tests prove that widening any
statement makes the comparison fail.
"""

from __future__ import annotations

import copy
import json

import pytest

from cadencia_shared.catalog import EMITIR_REEMBOLSO, RECONCILER_DB_USER, TOOLS
from cadencia_shared.ledger import GSI_UNSETTLED
from infra import contract
from infra.config import StackConfig, from_mapping
from infra.contract import Ids
from infra.policy_check import compare, extract_roles

from .conftest import BEDROCK_IMPORTED_CONTEXT

XRAY = set(contract.XRAY_ACTIONS)


def _all_pairs(template):
    return {(role, a, r) for role, g in extract_roles(template).items() for a, r in g.pairs}


@pytest.mark.infra
@pytest.mark.parametrize("variant", ["default", "bedrock+imported", "teardown=functions", "teardown=database-users"])
def test_every_role_equals_the_contract(all_synths, variant):
    synth = all_synths[variant]
    diffs = compare(synth.template, contract.build(synth.config))
    assert not diffs, "\n".join(d.describe() for d in diffs)


@pytest.mark.infra
def test_no_wildcards_beyond_xray_and_no_service_wildcards(all_synths):
    for name, synth in all_synths.items():
        for role, action, resource in _all_pairs(synth.template):
            assert "*" not in action, (name, role, action)
            if resource == "*":
                assert action in XRAY, f"{name}: {role} has {action} on *"
            else:
                # A "*" anywhere in an ARN widens it (".../index/*", "function:x:*"),
                # except the ":*" CloudFormation puts at the end of a log group's Arn attribute.
                # (A key pattern after the ARN narrows it: contract.scoped.)
                assert "*" not in contract.unscoped(resource), (name, role, action, resource)


@pytest.mark.infra
def test_database_and_secret_scoping(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        roles = extract_roles(synth.template)
        for tool in TOOLS.values():
            connects = {r for a, r in roles[Ids.role(tool)].pairs if a == "rds-db:connect"}
            assert connects == {contract.dbuser_arn(synth.config, tool.db_user)}
            assert all(r.endswith("/" + tool.db_user) for r in connects)
        for role_id, grants in roles.items():
            for action, resource in grants.pairs:
                if action == "secretsmanager:GetSecretValue" and resource == contract.ref(Ids.GATEWAY_SECRET):
                    assert role_id in {Ids.role(EMITIR_REEMBOLSO), Ids.RECONCILER_ROLE}, \
                        f"{role_id} can read the gateway secret"
                if action == "lambda:InvokeFunction" and role_id == Ids.DECISION_ROLE:
                    # Decisions resume the conversation through the orchestrator; never a tool.
                    assert resource == contract.att(Ids.ORCHESTRATOR_FUNCTION, "Arn")
                elif action == "lambda:InvokeFunction":
                    assert role_id in (Ids.ORCHESTRATOR_ROLE, Ids.WHATSAPP_CONSUMER_ROLE)
                    assert resource in {contract.att(Ids.function(t), "Arn") for t in TOOLS.values()}
                if action.startswith("rds-db:"):
                    assert role_id in ({Ids.role(t) for t in TOOLS.values()}
                                       | {Ids.RECONCILER_ROLE, Ids.WHATSAPP_INGRESS_ROLE})
                channel_secrets = {contract.ref(i) for i in (Ids.WHATSAPP_APP_SECRET, Ids.WHATSAPP_VERIFY_TOKEN,
                                                             Ids.WHATSAPP_ACCESS_TOKEN)}
                if action == "secretsmanager:GetSecretValue" and resource in channel_secrets:
                    # The Cloud API token sends (the consumer, a person's reply); the others verify (the webhook).
                    senders = (Ids.WHATSAPP_CONSUMER_ROLE, Ids.WHATSAPP_HUMAN_REPLY_ROLE)
                    assert role_id in (senders if resource == contract.ref(Ids.WHATSAPP_ACCESS_TOKEN)
                                       else (Ids.WHATSAPP_INGRESS_ROLE,)), role_id
        reconciler = roles[Ids.RECONCILER_ROLE].pairs
        assert {r for a, r in reconciler if a == "rds-db:connect"} == {
            contract.dbuser_arn(synth.config, RECONCILER_DB_USER)}
        assert {r for a, r in reconciler if a == "dynamodb:Query"} == {
            f"{contract.att(Ids.LEDGER, 'Arn')}/index/{GSI_UNSETTLED}"}
        assert not any(a in {"dynamodb:PutItem", "dynamodb:Scan", "lambda:InvokeFunction"} for a, _ in reconciler)
        consulta = roles[Ids.role(TOOLS["consultar_status_pedido"])]
        # Read-only: no secret, and on the ledger only SEAL's edge (its session read, its envelope used up).
        assert not any(a.startswith("secretsmanager:") for a, _ in consulta.pairs)
        assert {a for a, _ in consulta.pairs if a.startswith("dynamodb:")} == {"dynamodb:GetItem", "dynamodb:PutItem"}


@pytest.mark.infra
def test_model_access_follows_the_provider(default_synth, variant_synth):
    anthropic = extract_roles(default_synth.template)[Ids.ORCHESTRATOR_ROLE].pairs
    assert ("secretsmanager:GetSecretValue", contract.ref(Ids.ANTHROPIC_SECRET)) in anthropic
    assert not any(a.startswith("bedrock:") for a, _ in anthropic)

    bedrock = extract_roles(variant_synth.template)[Ids.ORCHESTRATOR_ROLE].pairs
    assert not any(a.startswith("secretsmanager:") for a, _ in bedrock)
    model_arns = {r for a, r in bedrock if a == "bedrock:InvokeModel"}
    assert model_arns == set(contract.bedrock_model_arns(variant_synth.config))
    assert all(variant_synth.config.foundation_model_id in arn for arn in model_arns)
    assert Ids.ANTHROPIC_SECRET not in variant_synth.resources


@pytest.mark.infra
def test_the_whatsapp_roles(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        roles = extract_roles(synth.template)
        ingress = roles[Ids.WHATSAPP_INGRESS_ROLE].pairs
        assert {r for a, r in ingress if a == "rds-db:connect"} == {
            contract.dbuser_arn(synth.config, "cadencia_canal_whatsapp")}
        assert {r for a, r in ingress if a.startswith("secretsmanager:")} == {
            contract.ref(Ids.WHATSAPP_APP_SECRET), contract.ref(Ids.WHATSAPP_VERIFY_TOKEN),
            contract.ref(Ids.WHATSAPP_QUEUE_KEY)}  # the queue key: it signs what it enqueues
        assert not any(a.startswith(("dynamodb:", "lambda:", "bedrock:")) for a, _ in ingress)
        consumer = roles[Ids.WHATSAPP_CONSUMER_ROLE].pairs
        assert not any(a.startswith("rds-db:") for a, _ in consumer)
        assert {(a, r) for a, r in consumer if a.startswith("sqs:")} == {
            *((a, contract.att(Ids.WHATSAPP_QUEUE, "Arn")) for a in (
                "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")),
            # The resend queue: it defers replies there and consumes them.
            *((a, contract.att(Ids.WHATSAPP_RESEND_QUEUE, "Arn")) for a in (
                "sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"))}
        assert (("secretsmanager:GetSecretValue", contract.ref(Ids.WHATSAPP_APP_SECRET)) not in consumer)
        assert {r for a, r in consumer if a == "secretsmanager:GetSecretValue"} >= {
            contract.ref(Ids.WHATSAPP_ACCESS_TOKEN), contract.ref(Ids.WHATSAPP_QUEUE_KEY)}
        # A person's reply: the ledger, the access token and the audit chain; no tool, model, queue or database.
        human = roles[Ids.WHATSAPP_HUMAN_REPLY_ROLE].pairs
        assert not any(a.startswith(("lambda:", "sqs:", "rds-db:", "bedrock:", "events:")) for a, _ in human)
        assert {r for a, r in human if a.startswith("secretsmanager:")} == {contract.ref(Ids.WHATSAPP_ACCESS_TOKEN)}


# --- widening must fail -------------------------------------------------------------


def _policy_of(template, role_id):
    for _logical_id, res in template["Resources"].items():
        if res["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in res["Properties"]["Roles"]:
            return res["Properties"]["PolicyDocument"]["Statement"]
    raise AssertionError(f"no policy for {role_id}")


def _widen_action(t):
    for stmt in _policy_of(t, Ids.role(EMITIR_REEMBOLSO)):
        if "dynamodb:PutItem" in stmt["Action"]:
            stmt["Action"] = [*stmt["Action"], "dynamodb:Query"]


def _dynamodb_star(t):
    for stmt in _policy_of(t, Ids.role(TOOLS["atualizar_cadastro"])):
        if "dynamodb:PutItem" in stmt["Action"]:
            stmt["Action"] = "dynamodb:*"


def _resource_star(t):
    for stmt in _policy_of(t, Ids.role(EMITIR_REEMBOLSO)):
        if stmt["Action"] == "secretsmanager:GetSecretValue":
            stmt["Resource"] = "*"


def _index_wildcard(t):
    for stmt in _policy_of(t, Ids.ORCHESTRATOR_ROLE):
        if "dynamodb:GetItem" in stmt["Action"]:
            stmt["Resource"] = [stmt["Resource"], {"Fn::Join": ["", [stmt["Resource"], "/index/*"]]}]


def _other_db_user(t):
    for stmt in _policy_of(t, Ids.role(TOOLS["consultar_status_pedido"])):
        if stmt["Action"] == "rds-db:connect":
            other = copy.deepcopy(stmt["Resource"])
            other["Fn::Join"][1][-1] = "/cadencia_agente_reembolso"
            stmt["Resource"] = [stmt["Resource"], other]


def _gateway_secret_to_consulta(t):
    _policy_of(t, Ids.role(TOOLS["consultar_status_pedido"])).append(
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": {"Ref": Ids.GATEWAY_SECRET}})


def _invoke_versions(t):
    for stmt in _policy_of(t, Ids.ORCHESTRATOR_ROLE):
        if stmt["Action"] == "lambda:InvokeFunction":
            arn = stmt["Resource"][0]
            stmt["Resource"].append({"Fn::Join": ["", [arn, ":*"]]})


def _extra_managed_policy(t):
    t["Resources"][Ids.ORCHESTRATOR_ROLE]["Properties"]["ManagedPolicyArns"] = [
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonDynamoDBFullAccess"]]}]


def _inline_policy_on_role(t):
    t["Resources"][Ids.role(TOOLS["atualizar_cadastro"])]["Properties"]["Policies"] = [
        {"PolicyName": "extra", "PolicyDocument": {"Statement": [
            {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": {"Fn::GetAtt": [Ids.LEDGER, "Arn"]}}]}}]


def _separate_policy_resource(t):
    t["Resources"]["SneakyPolicy"] = {"Type": "AWS::IAM::Policy", "Properties": {
        "PolicyName": "sneaky", "Roles": [{"Ref": Ids.role(EMITIR_REEMBOLSO)}],
        "PolicyDocument": {"Statement": [
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::x/*"}]}}}


def _condition_added(t):
    for stmt in _policy_of(t, Ids.role(EMITIR_REEMBOLSO)):
        if stmt["Action"] == "secretsmanager:GetSecretValue":
            stmt["NotResource"] = stmt.pop("Resource")


def _trust_widened(t):
    t["Resources"][Ids.ORCHESTRATOR_ROLE]["Properties"]["AssumeRolePolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": "arn:aws:iam::111122223333:root"}})


def _channel_reads_the_gateway_secret(t):
    for stmt in _policy_of(t, Ids.WHATSAPP_INGRESS_ROLE):
        if stmt["Action"] == "secretsmanager:GetSecretValue":
            stmt["Resource"].append({"Ref": Ids.GATEWAY_SECRET})


def _channel_connects_as_a_tool(t):
    for stmt in _policy_of(t, Ids.WHATSAPP_INGRESS_ROLE):
        if stmt["Action"] == "rds-db:connect":
            other = copy.deepcopy(stmt["Resource"])
            other["Fn::Join"][1][-1] = "/cadencia_agente_consulta"
            stmt["Resource"] = [stmt["Resource"], other]


def _consumer_changes_visibility(t):
    for stmt in _policy_of(t, Ids.WHATSAPP_CONSUMER_ROLE):
        if isinstance(stmt["Action"], list) and "sqs:ReceiveMessage" in stmt["Action"]:
            stmt["Action"] = [*stmt["Action"], "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl"]


def _ingress_sends_anywhere(t):
    for stmt in _policy_of(t, Ids.WHATSAPP_INGRESS_ROLE):
        if stmt["Action"] == "sqs:SendMessage":
            stmt["Resource"] = {"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:*"}


def _statement(t, role_id, action):
    for stmt in _policy_of(t, role_id):
        if stmt["Action"] == action or action in stmt["Action"]:
            return stmt
    raise AssertionError(f"no {action} statement on {role_id}")


def _reconciler_statement(t, action):
    return _statement(t, Ids.RECONCILER_ROLE, action)


def _reconciler_query_whole_table(t):
    stmt = _reconciler_statement(t, "dynamodb:Query")
    stmt["Resource"] = [stmt["Resource"], {"Fn::GetAtt": [Ids.LEDGER, "Arn"]}]


def _reconciler_scan(t):
    stmt = _reconciler_statement(t, "dynamodb:Query")
    stmt["Action"] = ["dynamodb:Query", "dynamodb:Scan"]


def _reconciler_put_item(t):
    stmt = _reconciler_statement(t, "dynamodb:UpdateItem")
    stmt["Action"] = [*stmt["Action"], "dynamodb:PutItem"]


def _reconciler_refund_db_user(t):
    stmt = _reconciler_statement(t, "rds-db:connect")
    other = copy.deepcopy(stmt["Resource"])
    other["Fn::Join"][1][-1] = "/cadencia_agente_reembolso"
    stmt["Resource"] = [stmt["Resource"], other]


def _reconciler_invokes_refund(t):
    _policy_of(t, Ids.RECONCILER_ROLE).append({"Effect": "Allow", "Action": "lambda:InvokeFunction",
                                              "Resource": {"Fn::GetAtt": [Ids.function(EMITIR_REEMBOLSO), "Arn"]}})


def _decision_statement(t, action):
    return _statement(t, Ids.DECISION_ROLE, action)


def _decision_invokes_refund(t):
    stmt = _decision_statement(t, "lambda:InvokeFunction")
    stmt["Resource"] = [stmt["Resource"], {"Fn::GetAtt": [Ids.function(EMITIR_REEMBOLSO), "Arn"]}]


def _decision_scan(t):
    stmt = _decision_statement(t, "dynamodb:Query")
    stmt["Action"] = ["dynamodb:Query", "dynamodb:Scan"]


def _decision_delete_item(t):
    stmt = _decision_statement(t, "dynamodb:UpdateItem")
    stmt["Action"] = [*stmt["Action"], "dynamodb:DeleteItem"]


def _decision_gateway_secret(t):
    _policy_of(t, Ids.DECISION_ROLE).append({"Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                                            "Resource": {"Ref": Ids.GATEWAY_SECRET}})


def _orchestrator_default_bus(t):
    for stmt in _policy_of(t, Ids.ORCHESTRATOR_ROLE):
        if stmt["Action"] == "events:PutEvents":
            stmt["Resource"] = [stmt["Resource"], {"Fn::Join": ["", [
                "arn:", {"Ref": "AWS::Partition"}, ":events:", {"Ref": "AWS::Region"}, ":",
                {"Ref": "AWS::AccountId"}, ":event-bus/default"]]}]
def _audit_statement(t):
    for stmt in _policy_of(t, Ids.ORCHESTRATOR_ROLE):
        if stmt["Resource"] == {"Fn::GetAtt": [Ids.AUDIT_TABLE, "Arn"]}:
            return stmt
    raise AssertionError("no audit-table statement on the orchestrator's role")


def _audit_update_item(t):
    stmt = _audit_statement(t)
    stmt["Action"] = [*stmt["Action"], "dynamodb:UpdateItem"]


def _audit_delete_item(t):
    stmt = _audit_statement(t)
    stmt["Action"] = [*stmt["Action"], "dynamodb:DeleteItem"]


def _audit_batch_write(t):
    stmt = _audit_statement(t)
    stmt["Action"] = [*stmt["Action"], "dynamodb:BatchWriteItem"]  # BatchWriteItem can delete


def _audit_delete_by_tool(t):
    _policy_of(t, Ids.role(TOOLS["atualizar_cadastro"])).append(
        {"Effect": "Allow", "Action": "dynamodb:DeleteItem", "Resource": {"Fn::GetAtt": [Ids.AUDIT_TABLE, "Arn"]}})


def _decision_audit_delete_item(t):
    for stmt in _policy_of(t, Ids.DECISION_ROLE):
        if stmt["Resource"] == {"Fn::GetAtt": [Ids.AUDIT_TABLE, "Arn"]}:
            stmt["Action"] = [*stmt["Action"], "dynamodb:DeleteItem"]
            return
    raise AssertionError("no audit-table statement on the decision role")


def _human_reply_statement(t, action):
    return _statement(t, Ids.WHATSAPP_HUMAN_REPLY_ROLE, action)


def _human_reply_invokes_the_orchestrator(t):
    _policy_of(t, Ids.WHATSAPP_HUMAN_REPLY_ROLE).append({
        "Effect": "Allow", "Action": "lambda:InvokeFunction",
        "Resource": {"Fn::GetAtt": [Ids.WHATSAPP_CONSUMER_FUNCTION, "Arn"]}})


def _human_reply_reads_the_app_secret(t):
    stmt = _human_reply_statement(t, "secretsmanager:GetSecretValue")
    stmt["Resource"] = [stmt["Resource"], {"Ref": Ids.WHATSAPP_APP_SECRET}]


def _human_reply_deletes_ledger_items(t):
    stmt = _human_reply_statement(t, "dynamodb:UpdateItem")
    stmt["Action"] = [*stmt["Action"], "dynamodb:DeleteItem"]


def _human_reply_queries_the_ledger(t):
    stmt = _human_reply_statement(t, "dynamodb:UpdateItem")
    stmt["Action"] = [*stmt["Action"], "dynamodb:Query"]


def _human_reply_audit_update(t):
    for stmt in _policy_of(t, Ids.WHATSAPP_HUMAN_REPLY_ROLE):
        if stmt["Resource"] == {"Fn::GetAtt": [Ids.AUDIT_TABLE, "Arn"]}:
            stmt["Action"] = [*stmt["Action"], "dynamodb:UpdateItem"]
            return
    raise AssertionError("no audit-table statement on the human reply role")


def _profile_anchor_statement(t):
    for stmt in _policy_of(t, Ids.role(TOOLS["atualizar_cadastro"])):
        if "Condition" in stmt:
            return stmt
    raise AssertionError("no conditioned (anchor) statement on the profile tool's role")


def _profile_anchor_condition_dropped(t):
    del _profile_anchor_statement(t)["Condition"]  # UpdateItem on every ledger item (refund claims included)


def _profile_anchor_any_key(t):
    _profile_anchor_statement(t)["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] = ["*"]


def _profile_anchor_extra_key(t):
    keys = _profile_anchor_statement(t)["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    keys.append("reembolso#*")


def _profile_anchor_if_exists(t):
    stmt = _profile_anchor_statement(t)
    stmt["Condition"] = {"ForAllValues:StringLikeIfExists": stmt["Condition"]["ForAllValues:StringLike"]}


def _profile_anchor_second_condition(t):
    _profile_anchor_statement(t)["Condition"]["Bool"] = {"aws:SecureTransport": "true"}


def _profile_anchor_put_item(t):
    stmt = _profile_anchor_statement(t)
    stmt["Action"] = [*stmt["Action"], "dynamodb:PutItem"]


def _profile_plain_ledger_put(t):
    _policy_of(t, Ids.role(TOOLS["atualizar_cadastro"])).append(
        {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": {"Fn::GetAtt": [Ids.LEDGER, "Arn"]}})


def _profile_audit_update(t):
    for stmt in _policy_of(t, Ids.role(TOOLS["atualizar_cadastro"])):
        if stmt["Resource"] == {"Fn::GetAtt": [Ids.AUDIT_TABLE, "Arn"]}:
            stmt["Action"] = [*stmt["Action"], "dynamodb:UpdateItem"]
            return
    raise AssertionError("no audit-table statement on the profile tool's role")


def _new_role(t):
    t["Resources"]["ShadowRole"] = copy.deepcopy(t["Resources"][Ids.role(EMITIR_REEMBOLSO)])


MUTATIONS = {
    "extra action": _widen_action,
    "dynamodb:*": _dynamodb_star,
    "resource *": _resource_star,
    "GSI wildcard": _index_wildcard,
    "another tool's db user": _other_db_user,
    "gateway secret for consulta": _gateway_secret_to_consulta,
    "invoke any version": _invoke_versions,
    "managed policy": _extra_managed_policy,
    "inline policy": _inline_policy_on_role,
    "separate AWS::IAM::Policy": _separate_policy_resource,
    "NotResource": _condition_added,
    "trust policy": _trust_widened,
    "new role": _new_role,
    "channel reads the gateway secret": _channel_reads_the_gateway_secret,
    "channel logs in as a tool's user": _channel_connects_as_a_tool,
    "consumer: grant_consume_messages' extras": _consumer_changes_visibility,
    "ingress: SendMessage to any queue": _ingress_sends_anywhere,
    "reconciler: Query on the whole table": _reconciler_query_whole_table,
    "reconciler: Scan": _reconciler_scan,
    "reconciler: PutItem": _reconciler_put_item,
    "reconciler: the refund tool's db user": _reconciler_refund_db_user,
    "reconciler: invoke the refund Lambda": _reconciler_invokes_refund,
    "decision: invoke the refund Lambda": _decision_invokes_refund,
    "decision: Scan": _decision_scan,
    "decision: DeleteItem": _decision_delete_item,
    "decision: the gateway secret": _decision_gateway_secret,
    "orchestrator: PutEvents on the default bus": _orchestrator_default_bus,
    "audit: UpdateItem": _audit_update_item,
    "audit: DeleteItem": _audit_delete_item,
    "audit: BatchWriteItem": _audit_batch_write,
    "audit: a tool deletes": _audit_delete_by_tool,
    "audit: the decision role deletes": _decision_audit_delete_item,
    "human reply: invoke the consumer": _human_reply_invokes_the_orchestrator,
    "human reply: the App Secret": _human_reply_reads_the_app_secret,
    "human reply: DeleteItem on the ledger": _human_reply_deletes_ledger_items,
    "human reply: Query on the ledger": _human_reply_queries_the_ledger,
    "audit: the human reply role updates": _human_reply_audit_update,
    "profile: anchor condition dropped": _profile_anchor_condition_dropped,
    "profile: anchor on any key": _profile_anchor_any_key,
    "profile: anchor plus refund keys": _profile_anchor_extra_key,
    "profile: anchor condition IfExists": _profile_anchor_if_exists,
    "profile: a second condition": _profile_anchor_second_condition,
    "profile: PutItem under the anchor condition": _profile_anchor_put_item,
    "profile: PutItem on the ledger": _profile_plain_ledger_put,
    "audit: the profile tool updates": _profile_audit_update,
}


@pytest.mark.infra
@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_widening_any_statement_fails_the_check(default_synth, mutation):
    template = copy.deepcopy(default_synth.template)
    before = json.dumps(template, sort_keys=True)
    MUTATIONS[mutation](template)
    assert json.dumps(template, sort_keys=True) != before, "the mutation did not apply"
    diffs = compare(template, contract.build(default_synth.config))
    assert diffs, f"widening ({mutation}) was not detected"


@pytest.mark.infra
def test_widening_the_contract_itself_breaks_its_own_rules():
    """The contract table obeys the same rules as the template (a widened table is not a way out)."""
    for config in (StackConfig(), from_mapping(BEDROCK_IMPORTED_CONTEXT)):
        for role in contract.build(config):
            for action, resource in role.pairs():
                assert "*" not in action
                assert resource != "*" or action in XRAY
                assert resource == "*" or "*" not in contract.unscoped(resource)
            for policy in role.managed_policies:
                assert policy is contract.ENI_MANAGEMENT


@pytest.mark.infra
@pytest.mark.parametrize("variant", ["default", "bedrock+imported", "teardown=functions", "teardown=database-users"])
def test_no_role_may_update_or_delete_an_audit_record(all_synths, variant):
    """On the synthesized template: every statement that names the audit table
    allows exactly PutItem and Query; none allows a write that changes or removes
    a record. The table keeps deletion protection and point-in-time recovery."""
    synth = all_synths[variant]
    audit_arn = {"Fn::GetAtt": [Ids.AUDIT_TABLE, "Arn"]}
    seen = []
    for res in synth.template["Resources"].values():
        if res["Type"] != "AWS::IAM::Policy":
            continue
        for stmt in res["Properties"]["PolicyDocument"]["Statement"]:
            resources = stmt["Resource"] if isinstance(stmt["Resource"], list) else [stmt["Resource"]]
            if audit_arn in resources or "*" in resources:
                actions = stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]]
                if audit_arn in resources:
                    seen.append(sorted(actions))
                assert not any(a.startswith("dynamodb:") and a not in ("dynamodb:PutItem", "dynamodb:Query")
                               for a in actions), stmt
    if Ids.AUDIT_TABLE in synth.template["Resources"]:
        # the writers: the orchestrator, the WhatsApp queue's consumer (the same loop), a
        # person's reply, the approval decisions (their audit records), and every tool
        # whose registry row appends to the chain (the profile tool) — counted from the
        # registry, so a fourth tool that appends is one row, not an edit here
        tools_appending = sum(tool.appends_audit for tool in TOOLS.values())
        assert seen == [["dynamodb:PutItem", "dynamodb:Query"]] * (4 + tools_appending)
        props = synth.template["Resources"][Ids.AUDIT_TABLE]["Properties"]
        assert props["DeletionProtectionEnabled"] is True
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert synth.template["Resources"][Ids.AUDIT_TABLE]["DeletionPolicy"] == "Retain"

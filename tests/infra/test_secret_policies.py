"""Every secret a role of the stack reads carries a resource policy that denies
``GetSecretValue`` to every principal but exactly those roles — read from the
synthesized template: the readers are the roles whose policies grant the read, the
exception list is what the secret's policy states (infra/secret_policies.py)."""

from __future__ import annotations

import copy

import pytest

from infra.contract import Ids
from infra.policy_check import extract_roles, render

pytestmark = pytest.mark.infra
READ = "secretsmanager:GetSecretValue"


def _readers_by_template(synth) -> dict[str, set[str]]:
    """secret logical id -> the role names whose identity policies grant reading it."""
    out: dict[str, set[str]] = {}
    secrets = set(synth.of_type("AWS::SecretsManager::Secret"))
    for role in extract_roles(synth.template).values():
        for action, resource in role.pairs:
            if action == READ:
                for secret in secrets:
                    if resource == "${" + secret + "}":
                        out.setdefault(secret, set()).add(str(role.role_name))
    return out


def _policies(synth) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for policy in synth.of_type("AWS::SecretsManager::ResourcePolicy").values():
        secret = policy["Properties"]["SecretId"]["Ref"]
        out.setdefault(secret, []).extend(policy["Properties"]["ResourcePolicy"]["Statement"])
    return out


def _excepted_role_names(statements: list[dict]) -> set[str] | None:
    """The role names the Deny of reading excepts (None: no such Deny)."""
    for st in statements:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        if st["Effect"] == "Deny" and READ in actions:
            assert st["Principal"] in ("*", {"AWS": "*"}), "the deny names every principal"
            assert set(st["Condition"]) == {"ArnNotEquals"}
            arns = st["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
            arns = arns if isinstance(arns, list) else [arns]
            names = set()
            for arn in arns:
                text = render(arn)
                assert ":role/" in text, text
                names.add(text.rsplit(":role/", 1)[1])
            return names
    return None


def _check(synth) -> None:
    readers = _readers_by_template(synth)
    policies = _policies(synth)
    assert Ids.GATEWAY_SECRET in readers and Ids.WHATSAPP_ACCESS_TOKEN in readers
    for secret, names in readers.items():
        excepted = _excepted_role_names(policies.get(secret, []))
        assert excepted == names, f"{secret}: the policy excepts {excepted}, the roles that read it are {names}"
    for statements in policies.values():  # nothing in a secret's policy grants anything
        assert not [st for st in statements if st["Effect"] == "Allow"]


def test_each_read_secret_is_denied_to_every_principal_but_its_readers(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        _check(synth)


def test_the_check_notices_a_widened_exception_list(default_synth):
    synth = copy.deepcopy(default_synth)
    for policy in synth.of_type("AWS::SecretsManager::ResourcePolicy").values():
        if policy["Properties"]["SecretId"] == {"Ref": Ids.GATEWAY_SECRET}:
            st = policy["Properties"]["ResourcePolicy"]["Statement"][0]
            st["Condition"]["ArnNotEquals"]["aws:PrincipalArn"].append("arn:aws:iam::111122223333:role/atacante")
    with pytest.raises(AssertionError, match=Ids.GATEWAY_SECRET):
        _check(synth)


def test_the_check_notices_a_missing_policy(default_synth):
    synth = copy.deepcopy(default_synth)
    synth.template["Resources"] = {k: v for k, v in synth.resources.items()
                                   if not (v["Type"] == "AWS::SecretsManager::ResourcePolicy"
                                           and v["Properties"]["SecretId"] == {"Ref": Ids.GATEWAY_SECRET})}
    with pytest.raises(AssertionError, match=Ids.GATEWAY_SECRET):
        _check(synth)

"""Read a synthesized template's IAM roles and compare them with the contract.

For every ``AWS::IAM::Role`` this collects the (action, resource) pairs of its
inline policies and of every ``AWS::IAM::Policy``/``AWS::IAM::ManagedPolicy``
attached to it, plus its AWS managed policy ARNs and trust principals.
Intrinsic functions are flattened into the contract's notation
(``${LogicalId}``, ``${LogicalId.Attr}``, ``${AWS::Region}``). Anything the
contract cannot express (Deny, NotAction, NotResource, a Condition other than
``ForAllValues:StringLike`` on ``dynamodb:LeadingKeys`` — which becomes part of
the resource, ``contract.scoped`` — an unflattenable intrinsic) is reported as a
difference rather than ignored.

``python -m infra.policy_check cdk.out/CadenciaAgente.template.json`` prints the
comparison for the default configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .grants import LEADING_KEYS, LEADING_KEYS_CONDITION, RoleContract, scoped


class Unrenderable(ValueError):
    pass


def render(value: Any) -> str:
    """Flatten an intrinsic-function value into the contract's string notation."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (fn, arg), = value.items()
        if fn == "Ref":
            name: str = arg
            return "${" + name + "}"
        if fn == "Fn::GetAtt":
            target: str
            attribute: str
            target, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return "${" + target + "." + attribute + "}"
        if fn == "Fn::Join":
            separator: str
            separator, parts = arg
            return separator.join(render(p) for p in parts)
        if fn == "Fn::Sub":
            template, variables = (arg, {}) if isinstance(arg, str) else arg
            return re.sub(r"\$\{([^}]+)\}",
                          lambda m: render(variables[m.group(1)]) if m.group(1) in variables else m.group(0), template)
    raise Unrenderable(json.dumps(value))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass
class RoleGrants:
    logical_id: str
    role_name: str | None
    services: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    managed_policies: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return _as_list(document.get("Statement", []))


def _leading_keys(stmt: dict[str, Any]) -> tuple[str, ...] | None:
    """The partition-key patterns of the one condition the contract expresses
    (``ForAllValues:StringLike`` on ``dynamodb:LeadingKeys``, nothing else in it);
    () without a condition; None for any other condition."""
    if "Condition" not in stmt:
        return ()
    condition = stmt["Condition"]
    operator = condition.get(LEADING_KEYS_CONDITION) if isinstance(condition, dict) and len(condition) == 1 else None
    if not isinstance(operator, dict) or set(operator) != {LEADING_KEYS}:
        return None
    keys = _as_list(operator[LEADING_KEYS])
    return tuple(keys) if keys and all(isinstance(k, str) for k in keys) else None


def _add_statements(grants: RoleGrants, document: dict[str, Any], where: str) -> None:
    for stmt in _statements(document):
        shape = sorted(set(stmt) - {"Effect", "Action", "Resource", "Sid", "Condition"})
        keys = _leading_keys(stmt)
        if stmt.get("Effect") != "Allow" or shape or keys is None:
            grants.problems.append(f"{where}: statement the contract cannot express: {json.dumps(stmt)}")
            continue
        for action in _as_list(stmt.get("Action", [])):
            for resource in _as_list(stmt.get("Resource", [])):
                try:
                    grants.pairs.add((action, scoped(render(resource), keys)))
                except Unrenderable as err:
                    grants.problems.append(f"{where}: resource not comparable: {err}")


def document_pairs(document: dict[str, Any], where: str) -> tuple[set[tuple[str, str]], list[str]]:
    """The (action, resource) pairs an identity-style policy document allows, and what
    in it the contract cannot express (for a resource policy, drop ``Principal`` first)."""
    grants = RoleGrants(where, None)
    _add_statements(grants, document, where)
    return grants.pairs, grants.problems


def _role_refs(value: Any) -> list[str]:
    refs = []
    for item in _as_list(value or []):
        if isinstance(item, dict) and "Ref" in item:
            refs.append(item["Ref"])
        else:
            refs.append(json.dumps(item))
    return refs


def _role_grants(logical_id: str, props: dict[str, Any]) -> RoleGrants:
    """A role's own parts: its trust policy, inline policies, managed policies, boundary."""
    grants = RoleGrants(logical_id, props.get("RoleName"))
    for stmt in _statements(props.get("AssumeRolePolicyDocument", {})):
        principal = stmt.get("Principal", {})
        if set(principal) != {"Service"} or stmt.get("Action") != "sts:AssumeRole" or "Condition" in stmt:
            grants.problems.append(f"trust policy allows more than a service: {json.dumps(stmt)}")
        grants.services.update(_as_list(principal.get("Service", [])))
    for policy in props.get("Policies", []) or []:
        _add_statements(grants, policy.get("PolicyDocument", {}), f"inline {policy.get('PolicyName')}")
    for arn in props.get("ManagedPolicyArns", []) or []:
        try:
            grants.managed_policies.add(render(arn))
        except Unrenderable as err:
            grants.problems.append(f"managed policy not comparable: {err}")
    if props.get("PermissionsBoundary"):
        grants.problems.append("permissions boundary present (not in the contract)")
    return grants


def _attach_policy(roles: dict[str, RoleGrants], logical_id: str, kind: str, props: dict[str, Any]) -> None:
    """A separate policy resource: its statements count for every role it names."""
    if props.get("Users") or props.get("Groups"):
        for role in roles.values():
            role.problems.append(f"{logical_id} is attached to users/groups")
    for role_id in _role_refs(props.get("Roles")):
        if role_id not in roles:
            continue
        if kind == "AWS::IAM::ManagedPolicy":
            # A customer managed policy is still a managed policy: the contract lists none.
            roles[role_id].managed_policies.add("${" + logical_id + "}")
        _add_statements(roles[role_id], props.get("PolicyDocument", {}), logical_id)


def extract_roles(template: dict[str, Any]) -> dict[str, RoleGrants]:
    resources = template.get("Resources", {})
    roles = {logical_id: _role_grants(logical_id, res.get("Properties", {}))
             for logical_id, res in resources.items() if res.get("Type") == "AWS::IAM::Role"}
    for logical_id, res in resources.items():
        kind = res.get("Type")
        if kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            _attach_policy(roles, logical_id, kind, res.get("Properties", {}))
    return roles


@dataclass
class RoleDiff:
    role: str
    missing: set[tuple[str, str]] = field(default_factory=set)
    extra: set[tuple[str, str]] = field(default_factory=set)
    missing_managed: set[str] = field(default_factory=set)
    extra_managed: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missing or self.extra or self.missing_managed or self.extra_managed or self.problems)

    def describe(self) -> str:
        lines = [f"role {self.role}:"]
        lines += [f"  extra (not in contract): {a} on {r}" for a, r in sorted(self.extra)]
        lines += [f"  missing (contract has it): {a} on {r}" for a, r in sorted(self.missing)]
        lines += [f"  extra managed policy: {m}" for m in sorted(self.extra_managed)]
        lines += [f"  missing managed policy: {m}" for m in sorted(self.missing_managed)]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


def _managed_names(arns: Iterable[str]) -> set[str]:
    # arn:${AWS::Partition}:iam::aws:policy/service-role/X -> service-role/X
    out = set()
    for arn in arns:
        match = re.fullmatch(r"arn:(?:\$\{AWS::Partition\}|aws):iam::aws:policy/(.+)", arn)
        out.add(match.group(1) if match else arn)
    return out


def compare(template: dict[str, Any], contract: list[RoleContract]) -> list[RoleDiff]:
    """Every difference between the template's roles and the contract (empty when equal)."""
    actual = extract_roles(template)
    expected = {role.logical_id: role for role in contract}
    diffs: list[RoleDiff] = []
    for logical_id in sorted(set(actual) | set(expected)):
        diff = RoleDiff(logical_id)
        if logical_id not in expected:
            diff.problems.append("role exists in the template but not in the contract")
            diff.extra = actual[logical_id].pairs
        elif logical_id not in actual:
            diff.problems.append("role is in the contract but not in the template")
            diff.missing = expected[logical_id].pairs()
        else:
            got, want = actual[logical_id], expected[logical_id]
            diff.missing = want.pairs() - got.pairs
            diff.extra = got.pairs - want.pairs()
            got_managed = _managed_names(got.managed_policies)
            want_managed = {m.name for m in want.managed_policies}
            diff.missing_managed = want_managed - got_managed
            diff.extra_managed = got_managed - want_managed
            diff.problems = list(got.problems)
            if got.services != {want.service}:
                diff.problems.append(f"trusted services {sorted(got.services)} != [{want.service}]")
            if want.role_name is not None and got.role_name != want.role_name:
                diff.problems.append(f"role name {got.role_name!r} != {want.role_name!r}")
        if diff:
            diffs.append(diff)
    return diffs


def main(argv: list[str] | None = None) -> int:
    import argparse

    from . import contract
    from .config import from_mapping

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("template")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                        help="the context the template was synthesized with")
    args = parser.parse_args(argv)
    context = dict(item.split("=", 1) for item in args.context)
    with open(args.template) as fh:
        template = json.load(fh)
    diffs = compare(template, contract.build(from_mapping(context)))
    for diff in diffs:
        print(diff.describe())
    roles = extract_roles(template)
    print(f"{len(roles)} roles, {sum(len(r.pairs) for r in roles.values())} (action, resource) pairs: "
          + ("equal to the contract" if not diffs else f"{len(diffs)} role(s) differ"))
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Ledger access by item kind (``infra/ledger_kinds.py``), checked two ways.

1. A small IAM evaluator reads the synthesized template (Allow/Deny, wildcard
   actions and resources, ``ForAllValues:StringLike`` on ``dynamodb:LeadingKeys``)
   and, for every role × item kind × action, the request is allowed exactly when the
   table says so. Mutations (condition dropped, ``*`` key, an extra action) prove the
   evaluator notices.
2. Each role's code (its handler's package and what it imports, outside the ledger
   library itself) is scanned for the item kinds it touches: a kind its row does not
   grant fails here before it fails in AWS.
"""

from __future__ import annotations

import ast
import copy
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from cadencia_shared.ledger import GSI_UNSETTLED
from infra.contract import Ids
from infra.ledger_kinds import KINDS, LEDGER_ACCESS, LEDGER_ARN, kind_sets, ledger_grants
from infra.policy_check import render

ROOT = Path(__file__).resolve().parents[2]
DYNAMODB_ITEM_ACTIONS = ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "BatchWriteItem",
                         "ConditionCheckItem", "Query", "Scan")
UNSETTLED_INDEX = f"{LEDGER_ARN}/index/{GSI_UNSETTLED}"


# --- the evaluator ------------------------------------------------------------------------


class Unsupported(AssertionError):
    """A statement shape this evaluator does not model: fail, never guess."""


def role_statements(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for res in template["Resources"].values():
        props = res.get("Properties", {})
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and \
                {"Ref": role_id} in props.get("Roles", []):
            out += _listed(props["PolicyDocument"]["Statement"])
    role = template["Resources"][role_id]["Properties"]
    for policy in role.get("Policies", []):
        out += _listed(policy["PolicyDocument"]["Statement"])
    return out


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches_any(value: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(value.lower(), p.lower()) for p in patterns)


def _condition_holds(condition: dict[str, Any] | None, leading_key: str | None) -> bool:
    if not condition:
        return True
    for operator, keys in condition.items():
        for key, values in keys.items():
            if operator != "ForAllValues:StringLike" or key != "dynamodb:LeadingKeys":
                raise Unsupported(f"condition {operator} {key}")
            # ForAllValues: every key of the request matches some pattern (vacuous without a key).
            if leading_key is not None and not _matches_any(leading_key, _listed(values)):
                return False
    return True


def _statement_applies(stmt: dict[str, Any], action: str, resource: str, leading_key: str | None) -> bool:
    if "NotAction" in stmt or "NotResource" in stmt or "NotPrincipal" in stmt:
        raise Unsupported(f"Not* element in {stmt}")
    if not _matches_any(action, _listed(stmt["Action"])):
        return False
    if not _matches_any(resource, [render(r) for r in _listed(stmt["Resource"])]):
        return False
    return _condition_holds(stmt.get("Condition"), leading_key)


def allowed(statements: list[dict[str, Any]], action: str, resource: str, leading_key: str | None) -> bool:
    """Explicit Deny wins; else some Allow must apply; else implicitly denied."""
    applying = [s for s in statements if _statement_applies(s, action, resource, leading_key)]
    return any(s["Effect"] == "Allow" for s in applying) and not any(s["Effect"] == "Deny" for s in applying)


def roles(template: dict[str, Any]) -> list[str]:
    return sorted(k for k, v in template["Resources"].items() if v["Type"] == "AWS::IAM::Role")


def mismatches(template: dict[str, Any]) -> list[str]:
    """Every (role, kind, action) on the ledger where the template and the table disagree."""
    out = []
    for role in roles(template):
        statements = role_statements(template, role)
        row = LEDGER_ACCESS.get(role, {})
        for prefix in [*KINDS, "outro#"]:  # "outro#": no kind at all, denied to everyone
            for name in DYNAMODB_ITEM_ACTIONS:
                action = f"dynamodb:{name}"
                expected = action in row.get(prefix, ())
                if allowed(statements, action, LEDGER_ARN, prefix + "x") != expected:
                    out.append(f"{role} {action} {prefix}: expected {'allowed' if expected else 'denied'}")
        # The index: only the two roles that list their work from it, and only Query.
        for name in DYNAMODB_ITEM_ACTIONS:
            action = f"dynamodb:{name}"
            expected = action == "dynamodb:Query" and role in (Ids.RECONCILER_ROLE, Ids.DECISION_ROLE)
            if allowed(statements, action, UNSETTLED_INDEX, None) != expected:
                out.append(f"{role} {action} on the unsettled index: expected {'allowed' if expected else 'denied'}")
    return out


@pytest.mark.infra
def test_every_role_kind_and_action_is_allowed_exactly_when_the_table_says(default_synth):
    assert not mismatches(default_synth.template), "\n".join(mismatches(default_synth.template))


def _ledger_statement(template: dict[str, Any], role_id: str, action: str) -> dict[str, Any]:
    for stmt in role_statements(template, role_id):
        if action in _listed(stmt["Action"]) and "Condition" in stmt:
            return stmt
    raise AssertionError(f"no conditioned ledger statement with {action} on {role_id}")


def _drop_condition(t: dict[str, Any]) -> None:
    del _ledger_statement(t, Ids.ORCHESTRATOR_ROLE, "dynamodb:PutItem")["Condition"]


def _any_key(t: dict[str, Any]) -> None:
    stmt = _ledger_statement(t, Ids.ORCHESTRATOR_ROLE, "dynamodb:PutItem")
    stmt["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] = ["*"]


def _extra_action(t: dict[str, Any]) -> None:
    stmt = _ledger_statement(t, Ids.RECONCILER_ROLE, "dynamodb:UpdateItem")
    stmt["Action"] = [*_listed(stmt["Action"]), "dynamodb:PutItem"]


def _wildcard_action(t: dict[str, Any]) -> None:
    _ledger_statement(t, Ids.DECISION_ROLE, "dynamodb:UpdateItem")["Action"] = "dynamodb:*"


def _extra_kind(t: dict[str, Any]) -> None:
    stmt = _ledger_statement(t, Ids.DECISION_ROLE, "dynamodb:UpdateItem")
    stmt["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"].append("reivindicacao#*")


def _deny_everything(t: dict[str, Any]) -> None:
    role_statements(t, Ids.RECONCILER_ROLE)  # exists
    for res in t["Resources"].values():
        if res["Type"] == "AWS::IAM::Policy" and {"Ref": Ids.RECONCILER_ROLE} in res["Properties"]["Roles"]:
            res["Properties"]["PolicyDocument"]["Statement"].append(
                {"Effect": "Deny", "Action": "dynamodb:*", "Resource": "*"})
            return


@pytest.mark.infra
@pytest.mark.parametrize("mutation", [_drop_condition, _any_key, _extra_action, _wildcard_action, _extra_kind,
                                      _deny_everything])
def test_the_evaluator_notices_a_mutated_grant(default_synth, mutation):
    template = copy.deepcopy(default_synth.template)
    mutation(template)
    assert mismatches(template)


def test_the_evaluator_refuses_conditions_it_does_not_model():
    stmt = {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": LEDGER_ARN,
            "Condition": {"ForAllValues:StringLikeIfExists": {"dynamodb:LeadingKeys": ["conversa#*"]}}}
    with pytest.raises(Unsupported):
        allowed([stmt], "dynamodb:GetItem", LEDGER_ARN, "conversa#1")


# --- the table ----------------------------------------------------------------------------


def test_every_row_names_known_kinds_and_item_actions_only():
    for role, row in LEDGER_ACCESS.items():
        assert set(row) <= set(KINDS), role
        for actions in row.values():
            assert actions and set(actions) <= {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, role


def test_the_contract_grants_are_the_table():
    for role in LEDGER_ACCESS:
        grants = ledger_grants(role)
        assert [(g.actions, g.leading_keys) for g in grants] == kind_sets(role)
        assert all(g.resources == (LEDGER_ARN,) for g in grants)
        assert all(p.endswith("#*") and p != "*" for g in grants for p in g.leading_keys)


def test_only_the_orchestrators_and_the_decision_role_touch_approvals():
    """The roles that write approval records are the orchestrators (the gate's request) and
    the decision role (a decision, and the new request a lower approved amount needs: its
    PutItem is what `approval_policy` calls), never a tool nor the channel's other roles."""
    assert "dynamodb:PutItem" in LEDGER_ACCESS[Ids.DECISION_ROLE]["aprovacao#"]
    writers = {r for r, row in LEDGER_ACCESS.items() if set(row.get("aprovacao#", ())) - {"dynamodb:GetItem"}}
    assert writers == {Ids.ORCHESTRATOR_ROLE, Ids.WHATSAPP_CONSUMER_ROLE, Ids.DECISION_ROLE}
    # The refund's edge only reads the approval a SEAL envelope names (codes 2005/2006).
    readers = {r for r, row in LEDGER_ACCESS.items() if row.get("aprovacao#") == ("dynamodb:GetItem",)}
    assert readers == {Ids.role("emitir_reembolso")}


# --- the code scan ------------------------------------------------------------------------

# Modules that define the kinds (the ledger library): scanning them would find every kind.
LIBRARY = ("cadencia_shared.ledger", "cadencia_shared.audit_chain", "cadencia_shared.audit_anchors",
           "cadencia_shared.dynamo_types")
# The names through which code reaches each kind (key builders and the stores' methods).
MARKERS: dict[str, tuple[str, ...]] = {
    "conversa#": ("conversation_pk", "acquire_conversation", "read_conversation", "commit_conversation",
                  "release_conversation", "cancellation_pending", "request_cancellation", "has_answered",
                  "waiting_for_a_person"),
    "contador#": ("counter_pk", "register_attempt"),
    "aprovacao#": ("approval_pk",),
    "decisao#": ("decision_pk",),
    "reivindicacao#": ("claim_pk", "get_claim", "claim_refund", "retake_claim", "settle_claim",
                       "mark_erp_updated"),
    "primeiro-reembolso#": ("first_refund_pk", "first_refund_conversation"),
    # ``append_audit`` writes an ``auditoria#`` item only without an audit table (every
    # deployed role has AUDIT_TABLE): the rows that carried that fallback keep it.
    "auditoria#": ("audit_pk",),
    "auditoria-cabeca#": ("append_audit",),
    "interruptor#": ("switch_pk", "tool_switch", "set_switch"),
    # SEAL: the turn's session (opened and closed by the orchestrators, read by the tools' edge)
    # and the used envelopes (cadencia_shared.seal writes "jti#…": found by the literal).
    "sessao#": ("session_pk", "SessionStore"),
}
# Role -> its handler module (as the constructs name it).
HANDLERS = {
    Ids.ORCHESTRATOR_ROLE: "orchestrator.handler",
    Ids.WHATSAPP_CONSUMER_ROLE: "orchestrator.whatsapp_consumer",
    Ids.WHATSAPP_HUMAN_REPLY_ROLE: "orchestrator.human_reply_handler",
    Ids.DECISION_ROLE: "decidir_aprovacao.handler",
    Ids.RECONCILER_ROLE: "conciliar_reembolsos.handler",
    Ids.role("emitir_reembolso"): "emitir_reembolso.handler",
    Ids.role("atualizar_cadastro"): "atualizar_cadastro.handler",
    Ids.role("consultar_status_pedido"): "consultar_status_pedido.handler",
}


def _source(module: str) -> Path | None:
    for base in (ROOT, ROOT / "functions"):
        for candidate in (base / (module.replace(".", "/") + ".py"), base / module.replace(".", "/") / "__init__.py"):
            if candidate.exists():
                return candidate
    return None


def _imports(module: str, tree: ast.Module) -> set[str]:
    out: set[str] = set()
    path = _source(module)
    package = module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def _closure(entry: str) -> dict[str, str]:
    """Module -> source, for the entry and every repo module it imports (transitively),
    the ledger library excluded."""
    seen: dict[str, str] = {}
    todo = [entry]
    while todo:
        module = todo.pop()
        if module in seen or module.startswith(LIBRARY):
            continue
        path = _source(module)
        if path is None:
            continue
        text = path.read_text()
        seen[module] = text
        todo += _imports(module, ast.parse(text))
    return seen


def kinds_used(entry: str) -> set[str]:
    used: set[str] = set()
    for text in _closure(entry).values():
        for kind, names in MARKERS.items():
            if any(re.search(rf"\b{name}\b", text) for name in names):
                used.add(kind)
        used |= {m + "#" for m in re.findall(r"[\"']([a-z][a-z-]*)#", text) if m + "#" in KINDS}
        item_type = re.search(r"^ITEM_TYPE = \"([a-z-]+)\"", text, re.M)
        if item_type and "{ITEM_TYPE}#" in text:
            used.add(item_type.group(1) + "#")
    return used


@pytest.mark.parametrize("role", sorted(HANDLERS))
def test_a_roles_code_uses_only_the_kinds_its_row_grants(role):
    used = kinds_used(HANDLERS[role])
    granted = set(LEDGER_ACCESS.get(role, {}))
    assert used <= granted, f"{role}'s code reaches {sorted(used - granted)}: add them to its row in " \
                            "infra/ledger_kinds.py (or stop using them)"


def test_the_scan_sees_kinds():
    """The scan is not vacuous: the orchestrator's code reaches these kinds."""
    assert {"conversa#", "contador#", "aprovacao#", "decisao#", "disjuntor#", "envio#"} \
        <= kinds_used("orchestrator.handler")
    assert "decisao#" in kinds_used("decidir_aprovacao.handler")

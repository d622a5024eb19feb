"""Who may invoke the operators' functions: the resource-policy half of the contract.

``infra/contract.py`` lists what each role may do; this lists who may call the two
functions a person drives (the approval decisions and the person's reply). Their
resource policies hold exactly these rows (``tests/infra/test_operator_api.py``
compares them with the synthesized template's ``AWS::Lambda::Permission``s):

- the operators' HTTP API, each permission scoped by ``aws:SourceArn`` to one of its
  routes (the JWT authorizer has verified the person first);
- for the decisions, the expiry schedule (EventBridge, scoped to its rule).

Break-glass: no role of this stack may invoke them, and no resource policy lets any
other principal in. A principal that the deployer's own administrators grant
``lambda:InvokeFunction`` on them (outside this stack, e.g. an MFA-protected
emergency role) reaches the direct-invocation path, which takes the actor from the
event and audits every decision and reply with ``via = quebra_de_vidro``
(docs/decisions/operator-identity.md). ``render_markdown`` writes these rows into
docs/operators.md (a test keeps the two equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cadencia_shared.catalog import DECISION_FUNCTION_NAME
from cadencia_shared.identity import VIA_BREAK_GLASS
from canal_whatsapp.settings import HUMAN_REPLY_FUNCTION_NAME
from orchestrator.api_routes import ROUTES

from .logical_ids import Ids

API_PRINCIPAL = "apigateway.amazonaws.com"
EVENTS_PRINCIPAL = "events.amazonaws.com"
FUNCTION_IDS = {DECISION_FUNCTION_NAME: Ids.DECISION_FUNCTION,
                HUMAN_REPLY_FUNCTION_NAME: Ids.WHATSAPP_HUMAN_REPLY_FUNCTION}


@dataclass(frozen=True)
class Invoker:
    function: str  # the function's name
    principal: str
    source: str  # what aws:SourceArn names: "api:<route path>" or "rule:<logical id>"
    why: str


def invokers() -> list[Invoker]:
    rows = [Invoker(route.function, API_PRINCIPAL, f"api:{route.path}",
                    f"the operators' HTTP API, route {route.route_key}, behind the JWT authorizer")
            for route in ROUTES]
    rows.append(Invoker(DECISION_FUNCTION_NAME, EVENTS_PRINCIPAL, f"rule:{Ids.APPROVAL_EXPIRY_SCHEDULE}",
                        "the schedule that closes requests expired undecided"))
    return rows


def source_of(source_arn: object) -> str | None:
    """A permission's SourceArn as the rows above spell it (None: not one of those shapes)."""
    if isinstance(source_arn, dict) and "Fn::GetAtt" in source_arn:
        return f"rule:{source_arn['Fn::GetAtt'][0]}"
    if isinstance(source_arn, dict) and "Fn::Join" in source_arn:
        parts = source_arn["Fn::Join"][1]
        api_refs = [p["Ref"] for p in parts if isinstance(p, dict) and "Ref" in p]
        tail = parts[-1] if isinstance(parts[-1], str) else ""
        match = re.fullmatch(r"/\*/\*(/.*)", tail)
        if match and any(ref.startswith(Ids.OPERATOR_API) for ref in api_refs):
            return f"api:{match.group(1)}"
    return None


def render_markdown() -> str:
    lines = ["| function | may be invoked by | scoped to (aws:SourceArn) | why |", "|---|---|---|---|"]
    for row in invokers():
        lines.append(f"| `{row.function}` | `{row.principal}` | `{row.source}` | {row.why} |")
    lines.append(f"| both | break-glass only (a principal granted outside this stack) | — | direct invocation; "
                 f"every decision and reply audited with `via = {VIA_BREAK_GLASS}` |")
    return "\n".join(lines)


BEGIN, END = "<!-- operator-invokers:begin -->", "<!-- operator-invokers:end -->"


def block(text: str) -> str:
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()

"""Who may invoke the operators' functions: the resource-policy half of the contract.

``infra/contract.py`` lists what each role may do; this lists who may call the two
functions a person drives (the approval decisions and the person's reply) and the
console's cookie authorizer. Their resource policies hold exactly these rows
(``tests/infra/test_operator_api.py`` compares them with the synthesized template's
``AWS::Lambda::Permission``s):

- the operators' HTTP API, each permission scoped by ``aws:SourceArn`` to one of its
  routes (the JWT authorizer, or for the console's pages the cookie authorizer, has
  verified the person first; the sign-in page has no authorizer);
- for the decisions, the expiry schedule (EventBridge, scoped to its rule);
- for the cookie authorizer, API Gateway running it as that authorizer (scoped to the
  API's ``authorizers/{id}``). Its role (``console_authorizer_role``, a row of
  ``infra/contract.py``'s ``build``) holds only its log group and tracing: it reads
  Cognito's public JWKS over HTTPS and calls no AWS API.

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
from orchestrator.api_routes import AUTH_COOKIE, AUTH_NONE, CONSOLE_ROUTES, ROUTES

from .grants import RoleContract, platform
from .logical_ids import Ids

API_PRINCIPAL = "apigateway.amazonaws.com"
EVENTS_PRINCIPAL = "events.amazonaws.com"
CONSOLE_AUTHORIZER_FUNCTION_NAME = "cadencia-autorizar-console"
CONSOLE_AUTHORIZER_ROLE_NAME = "cadencia-autorizar-console-role"
FUNCTION_IDS = {DECISION_FUNCTION_NAME: Ids.DECISION_FUNCTION,
                HUMAN_REPLY_FUNCTION_NAME: Ids.WHATSAPP_HUMAN_REPLY_FUNCTION,
                CONSOLE_AUTHORIZER_FUNCTION_NAME: Ids.CONSOLE_AUTHORIZER_FUNCTION}
BEHIND = {AUTH_COOKIE: "behind the console's cookie authorizer",
          AUTH_NONE: "the console's sign-in, no authorizer (it only sets the cookie the authorizer verifies)"}


@dataclass(frozen=True)
class Invoker:
    function: str  # the function's name
    principal: str
    source: str  # what aws:SourceArn names: "api:<route path>", "rule:<logical id>" or "authorizer:<logical id>"
    why: str


def invokers() -> list[Invoker]:
    rows = [Invoker(route.function, API_PRINCIPAL, f"api:{route.path}",
                    f"the operators' HTTP API, route {route.route_key}, "
                    f"{BEHIND.get(route.auth, 'behind the JWT authorizer')}")
            for route in ROUTES + CONSOLE_ROUTES]
    rows.append(Invoker(DECISION_FUNCTION_NAME, EVENTS_PRINCIPAL, f"rule:{Ids.APPROVAL_EXPIRY_SCHEDULE}",
                        "the schedule that closes requests expired undecided"))
    rows.append(Invoker(CONSOLE_AUTHORIZER_FUNCTION_NAME, API_PRINCIPAL, f"authorizer:{Ids.CONSOLE_AUTHORIZER}",
                        "API Gateway, running it as the operators' API's cookie authorizer (every console page "
                        "but the sign-in)"))
    return rows


def console_authorizer_role() -> RoleContract:
    return RoleContract(
        logical_id=Ids.CONSOLE_AUTHORIZER_ROLE, role_name=CONSOLE_AUTHORIZER_ROLE_NAME,
        service="lambda.amazonaws.com",
        purpose=f"Lambda {CONSOLE_AUTHORIZER_FUNCTION_NAME} (the console's cookie authorizer: verifies the "
                "session's token against Cognito's public JWKS over HTTPS, calls no AWS API; outside the VPC)",
        grants=platform("${" + Ids.CONSOLE_AUTHORIZER_LOG_GROUP + ".Arn}"),
    )


def source_of(source_arn: object) -> str | None:
    """A permission's SourceArn as the rows above spell it (None: not one of those shapes)."""
    if isinstance(source_arn, dict) and "Fn::GetAtt" in source_arn:
        return f"rule:{source_arn['Fn::GetAtt'][0]}"
    if isinstance(source_arn, dict) and "Fn::Join" in source_arn:
        return _api_source(source_arn["Fn::Join"][1])
    return None


def _api_source(parts: list[object]) -> str | None:
    """``…:{api}/*/*/route/path`` (a route's) or ``…:{api}/authorizers/{authorizer}`` (an authorizer's)."""
    refs = [p["Ref"] for p in parts if isinstance(p, dict) and "Ref" in p]
    if not any(ref.startswith(Ids.OPERATOR_API) for ref in refs):
        return None
    last = parts[-1]
    if len(parts) >= 2 and parts[-2] == "/authorizers/" and isinstance(last, dict) and "Ref" in last:
        return f"authorizer:{last['Ref']}"
    match = re.fullmatch(r"/\*/\*(/.*)", last) if isinstance(last, str) else None
    return f"api:{match.group(1)}" if match else None


def render_markdown() -> str:
    lines = ["| function | may be invoked by | scoped to (aws:SourceArn) | why |", "|---|---|---|---|"]
    for row in invokers():
        lines.append(f"| `{row.function}` | `{row.principal}` | `{row.source}` | {row.why} |")
    lines.append("| the decisions and the reply | break-glass only (a principal granted outside this stack) | — | "
                 f"direct invocation; "
                 f"every decision and reply audited with `via = {VIA_BREAK_GLASS}` |")
    return "\n".join(lines)


BEGIN, END = "<!-- operator-invokers:begin -->", "<!-- operator-invokers:end -->"


def block(text: str) -> str:
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()

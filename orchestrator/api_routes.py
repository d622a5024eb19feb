"""The operators' HTTP API: one row per route, read by infra (the HTTP API's routes,
each behind the JWT authorizer, integrated with its function) and by the local
stack's API adapter (scripts/local_stack/api_adapter.py), so the two cannot drift.

Route keys are API Gateway's (``METHOD /path/{param}``). Which group may use a
route is checked by the function's code (cadencia_shared.identity), not here: the
authorizer only proves who the person is.
"""

from __future__ import annotations

from dataclasses import dataclass

from cadencia_shared.catalog import DECISION_FUNCTION_NAME
from cadencia_shared.identity import SESSION_COOKIE as SESSION_COOKIE
from canal_whatsapp.settings import HUMAN_REPLY_FUNCTION_NAME

# How a route proves who is calling: the JWT authorizer (``Authorization`` header), the
# console's cookie authorizer (the same token, verified by the same rules, read from the
# ``cadencia_sessao`` cookie: docs/decisions/console-auth.md), or nobody (the sign-in page).
AUTH_JWT, AUTH_COOKIE, AUTH_NONE = "jwt", "cookie", "none"


@dataclass(frozen=True)
class ApiRoute:
    route_key: str  # "POST /aprovacoes/{aprovacaoId}/decisao"
    function: str
    auth: str = AUTH_JWT

    @property
    def method(self) -> str:
        return self.route_key.split(" ", 1)[0]

    @property
    def path(self) -> str:
        return self.route_key.split(" ", 1)[1]


ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute("GET /aprovacoes", DECISION_FUNCTION_NAME),
    ApiRoute("GET /aprovacoes/{aprovacaoId}", DECISION_FUNCTION_NAME),
    ApiRoute("POST /aprovacoes/{aprovacaoId}/decisao", DECISION_FUNCTION_NAME),
    ApiRoute("POST /conversas/{conversaId}/respostas", HUMAN_REPLY_FUNCTION_NAME),
    ApiRoute("GET /interruptores", DECISION_FUNCTION_NAME),
    ApiRoute("POST /interruptores/{ferramenta}", DECISION_FUNCTION_NAME),
)
# The operators' console: server-rendered pages served by the decision function
# (decidir_aprovacao/console.py), signed in with a cookie. The local stack's adapter serves
# them, and the deployed HTTP API, behind its cookie authorizer (infra/console_authorizer.py).
CONSOLE_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute("GET /console/entrar", DECISION_FUNCTION_NAME, AUTH_NONE),
    ApiRoute("POST /console/entrar", DECISION_FUNCTION_NAME, AUTH_NONE),
    ApiRoute("POST /console/sair", DECISION_FUNCTION_NAME, AUTH_COOKIE),
    ApiRoute("GET /console/aprovacoes", DECISION_FUNCTION_NAME, AUTH_COOKIE),
    ApiRoute("GET /console/aprovacoes/{aprovacaoId}", DECISION_FUNCTION_NAME, AUTH_COOKIE),
    ApiRoute("POST /console/aprovacoes/{aprovacaoId}/decisao", DECISION_FUNCTION_NAME, AUTH_COOKIE),
    ApiRoute("GET /console/interruptores", DECISION_FUNCTION_NAME, AUTH_COOKIE),
    ApiRoute("POST /console/interruptores/{ferramenta}", DECISION_FUNCTION_NAME, AUTH_COOKIE),
)
# The audience (app client id) the local issuer's tokens carry and the adapter accepts.
LOCAL_AUDIENCE = "cadencia-console-local"

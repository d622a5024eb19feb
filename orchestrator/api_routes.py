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
from canal_whatsapp.settings import HUMAN_REPLY_FUNCTION_NAME


@dataclass(frozen=True)
class ApiRoute:
    route_key: str  # "POST /aprovacoes/{aprovacaoId}/decisao"
    function: str

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
# The audience (app client id) the local issuer's tokens carry and the adapter accepts.
LOCAL_AUDIENCE = "cadencia-console-local"

"""The operators' console: server-rendered pages on the decision function (Jinja2,
autoescaped; no script on any page; Brazilian Portuguese).

    GET  /console/entrar, POST /console/entrar    sign in (no session yet), POST /console/sair
    GET  /console/aprovacoes[/{aprovacaoId}]      requests (any operator reads; approvers decide)
    POST /console/aprovacoes/{aprovacaoId}/decisao          approve (a lower amount) or deny
    GET  /console/interruptores, POST /console/interruptores/{ferramenta}   supervisors only

Who acts is the platform authorizer's (``identity.person_from_event``): the pages are
signed in with a cookie that a Lambda authorizer verifies (docs/decisions/console-auth.md).
Every POST carries the session's CSRF token (``console_session``) and a strict form; the
decision and the switch are ``actions``' (the JSON API's own code), so the policy is one.
Pages answer with a strict Content-Security-Policy and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.shared.cookies import Cookie
from jinja2 import Environment, FileSystemLoader
from pydantic import Field, ValidationError

from cadencia_shared import approval_policy, sign_outs
from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.catalog import TOOLS
from cadencia_shared.identity import APPROVERS, GROUPS, SUPERVISORS, IdentityRefused, Person, person_from_event
from cadencia_shared.ledger import Ledger
from cadencia_shared.models import APPROVAL_ID_PATTERN
from cadencia_shared.settings import EnvSettings

from . import actions
from .console_session import (
    CSRF_FIELD,
    JWT_SHAPE,
    FormRefused,
    check_csrf,
    cleared_cookie,
    csrf_token,
    form_body,
    session_cookie,
    session_token,
)
from .logic import masked
from .switches_api import SwitchChange

PAGES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True)
SECURITY_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": ("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
MESSAGES = {
    "csrf_invalido": "Sessão ou formulário inválido: recarregue a página e tente de novo. Nada foi alterado.",
    "grupo_nao_autorizado": "Você não está no grupo que pode fazer isso. Nada foi alterado.",
    "sem_identidade": "Entre de novo para continuar.",
    "sessao_encerrada": "Esta sessão foi encerrada: entre de novo para continuar. Nada foi alterado.",
    "ator_no_corpo": "O formulário não pode dizer quem age. Nada foi alterado.",
    "aprovador_ja_negou": "Você já negou este pedido; não pode aprová-lo.",
    "conversa_cancelada": "A conversa foi cancelada: o pedido não pode ser decidido.",
    "conversa_com_atendente": "A conversa está com um atendente: o pedido não pode ser decidido.",
    "valor_acima_do_pedido": "O valor aprovado não pode ser maior que o pedido.",
    "valor_invalido": "Valor inválido: use reais com ponto, por exemplo 150.00.",
    "aprovacao_expirada": "O pedido expirou antes da decisão; o cliente foi avisado.",
    "aprovacao_ja_decidida": "O pedido já foi decidido.",
    "aprovacao_inexistente": "Pedido não encontrado.",
    "ferramenta_inexistente": "Ferramenta não encontrada.",
    "entrada_invalida": "Preencha o formulário: a justificativa tem de 3 a 500 caracteres, numa linha.",
    "login_invalido": "Usuário ou senha inválidos.",
}
OUTCOMES = {  # what the page after a decision says (the redirect names the outcome, nothing personal)
    "aprovada": "Aprovado: a chamada vai rodar e o cliente será avisado.",
    "negada": "Negado: o cliente será avisado.",
    approval_policy.AWAITING_SECOND: "Sua aprovação foi registrada; falta a de outra pessoa (valor acima do "
                                     "limite de duas pessoas).",
}
REASONS = {"acima_do_limite": "valor acima do limite automático",
           "segundo_reembolso": "segundo reembolso do mesmo pedido"}
DECISION_FIELDS = frozenset({CSRF_FIELD, "decisao", "justificativa", "valorAprovado"})
SWITCH_FIELDS = frozenset({CSRF_FIELD, "estado", "motivo"})
SIGN_IN_FIELDS = frozenset({"login", "senha", "token"})
TOOL_PATTERN = re.compile(r"\A[a-z_]{1,64}\Z")


class ConsoleSettings(EnvSettings):
    # The issuer's token endpoint for signing in with a login and password (the local
    # stack's issuer); empty: the person pastes an access token they already hold.
    token_url: str = Field("", alias="CONSOLE_TOKEN_URL")
    client_id: str = Field("", alias="CONSOLE_CLIENT_ID")


class PageError(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.status, self.code = status, code


def page(template: str, status: int = 200, *, cookies: list[Cookie] | None = None, **context: Any) -> Response[str]:
    body = PAGES.get_template(template).render(**context)
    return Response(status_code=status, body=body, headers=dict(SECURITY_HEADERS), cookies=cookies or [])


def see_other(location: str, cookies: list[Cookie] | None = None) -> Response[str]:
    return Response(status_code=303, body="", headers={**SECURITY_HEADERS, "Location": location},
                    cookies=cookies or [])


def register(app: APIGatewayHttpResolver, ledger: Ledger, *, resume: Callable[[str], None],
             policy: approval_policy.PolicySettings, settings: ConsoleSettings | None = None) -> None:
    """Add the console's routes to the decision function's router."""
    settings = settings or ConsoleSettings.from_env()

    def event() -> dict[str, Any]:
        raw: dict[str, Any] = app.current_event.raw_event
        return raw

    def operator() -> Person:
        try:
            who = person_from_event(event())
        except IdentityRefused as refused:
            raise PageError(refused.status, refused.code) from None
        token = session_token(event())
        if token is None or sign_outs.signed_out(ledger, token):
            raise PageError(401, "sessao_encerrada")
        if not who.groups.intersection(GROUPS):
            raise PageError(403, "grupo_nao_autorizado")
        return who

    def common(who: Person) -> dict[str, Any]:
        session = session_token(event())
        return {"pessoa": who, "csrf": csrf_token(session) if session else "",
                "supervisor": SUPERVISORS in who.groups, "aprovador": APPROVERS in who.groups}

    def posted(fields: frozenset[str]) -> dict[str, str]:
        form = form_body(event(), fields)
        check_csrf(event(), form)
        return form

    @app.exception_handler(PageError)  # type: ignore[untyped-decorator]  # Powertools leaves exception_handler untyped
    def _page_error(err: PageError) -> Response[str]:
        return page("erro.html", err.status, mensagem=MESSAGES.get(err.code, err.code), pessoa=None)

    @app.exception_handler(FormRefused)  # type: ignore[untyped-decorator]  # Powertools leaves exception_handler untyped
    def _form_error(err: FormRefused) -> Response[str]:
        return page("erro.html", err.status, mensagem=MESSAGES.get(err.code, err.code), pessoa=None)

    @app.get("/console/entrar")
    def sign_in_page() -> Response[str]:
        return page("entrar.html", senha=bool(settings.token_url), pessoa=None)

    @app.post("/console/entrar")
    def sign_in() -> Response[str]:
        form = form_body(event(), SIGN_IN_FIELDS)
        token = _token(settings, form)
        if token is None:
            return page("entrar.html", 401, senha=bool(settings.token_url), pessoa=None,
                        mensagem=MESSAGES["login_invalido"])
        return see_other("/console/aprovacoes", [session_cookie(token)])

    @app.post("/console/sair")
    def sign_out() -> Response[str]:
        posted(frozenset({CSRF_FIELD}))
        token = session_token(event())
        if token is not None:  # posted() checked the CSRF token against it
            sign_outs.record_sign_out(ledger, token)
        return see_other("/console/entrar", [cleared_cookie()])

    @app.get("/console/aprovacoes")
    def approvals() -> Response[str]:
        who = operator()
        now = ledger.now_ms()
        pending = [_view(r, now) for r in ApprovalStore(ledger).pending()]
        return page("aprovacoes.html", pendentes=pending, **common(who))

    def show(approval: str, who: Person, status: int = 200, message: str | None = None,
             notice: str | None = None) -> Response[str]:
        record = ApprovalStore(ledger).get(approval)
        if record is None:
            raise PageError(404, "aprovacao_inexistente")
        return page("aprovacao.html", status, a=_view(record, ledger.now_ms(), full=record), mensagem=message,
                    aviso=notice, **common(who))

    @app.get("/console/aprovacoes/<approval>")
    def approval_page(approval: str) -> Response[str]:
        who = operator()
        outcome = (app.current_event.query_string_parameters or {}).get("resultado", "")
        return show(_approval_id(approval), who, notice=OUTCOMES.get(outcome))

    @app.post("/console/aprovacoes/<approval_path>/decisao")
    def decision(approval_path: str) -> Response[str]:
        approval = _approval_id(approval_path)
        form = posted(DECISION_FIELDS)
        who = operator()
        amount = form.get("valorAprovado", "").strip() or None
        try:
            request = actions.ApiDecision.model_validate({"decisao": form.get("decisao"), "justificativa":
                                                  form.get("justificativa", ""), "valorAprovado": amount}, strict=True)
        except ValidationError:
            return show(approval, who, 400, MESSAGES["entrada_invalida"])
        try:
            decided = actions.decide(ledger, approval, who=who, approve=request.decisao == "aprovar",
                                     justification=request.justificativa, amount_text=request.valorAprovado,
                                     policy=policy, resume=resume)
        except actions.Refused as refused:
            status = {"grupo_nao_autorizado": 403, "valor_invalido": 400, "aprovacao_inexistente": 404}
            return show(approval, who, status.get(refused.code, 409), MESSAGES.get(refused.code, refused.code))
        return see_other(f"/console/aprovacoes/{decided.record.id}?resultado={decided.outcome}")

    @app.get("/console/interruptores")
    def switches() -> Response[str]:
        who = operator()
        if SUPERVISORS not in who.groups:
            raise PageError(403, "grupo_nao_autorizado")
        listing = [ledger.tool_switch(name).public() for name in sorted(TOOLS)]
        return page("interruptores.html", interruptores=listing, **common(who))

    @app.post("/console/interruptores/<tool>")
    def switch(tool: str) -> Response[str]:
        form = posted(SWITCH_FIELDS)
        who = operator()
        if SUPERVISORS not in who.groups:
            raise PageError(403, "grupo_nao_autorizado")
        if not TOOL_PATTERN.match(tool) or tool not in TOOLS:
            raise PageError(404, "ferramenta_inexistente")
        try:
            request = SwitchChange.model_validate({"estado": form.get("estado"), "motivo": form.get("motivo", "")},
                                                  strict=True)
        except ValidationError:
            raise PageError(400, "entrada_invalida") from None
        actions.switch(ledger, tool, who=who, state=request.estado, reason=request.motivo)
        return see_other("/console/interruptores")


def _approval_id(value: str) -> str:
    if not re.fullmatch(APPROVAL_ID_PATTERN, value):
        raise PageError(404, "aprovacao_inexistente")
    return value


def _view(record: Any, now_ms: int, full: Any = None) -> dict[str, Any]:
    """What a page shows of a request: the masked call (``logic.masked``), why a person
    decides, the time left; a decided one says who and when."""
    view = masked(record, now_ms)
    view["porque"] = REASONS.get(record.reason, record.reason)
    view["argumentosTexto"] = json.dumps(view["argumentos"], ensure_ascii=False, sort_keys=True)
    left_s = max(0, (record.expires_at_ms - now_ms) // 1000)
    view["restante"] = f"{left_s // 60} min {left_s % 60:02d} s" if left_s else "expirado"
    view["decididoEm"] = record.decided_at
    view["justificativa"] = record.justification if full is not None else None
    return view


def _token(settings: ConsoleSettings, form: dict[str, str]) -> str | None:
    """A token to put in the session: pasted, or from the issuer's password grant. It is
    not trusted here: the authorizer verifies it on every later request."""
    pasted = form.get("token", "").strip()
    if pasted:
        return pasted if JWT_SHAPE.match(pasted) else None
    if not settings.token_url or not form.get("login") or not form.get("senha"):
        return None
    data = urllib.parse.urlencode({"grant_type": "password", "username": form["login"],
                                   "password": form["senha"], "client_id": settings.client_id}).encode()
    try:
        with urllib.request.urlopen(settings.token_url, data=data, timeout=10) as resp:  # noqa: S310 - configured URL
            token = json.load(resp).get("access_token")
    except (urllib.error.URLError, ValueError, OSError):
        return None
    return token if isinstance(token, str) and JWT_SHAPE.match(token) else None

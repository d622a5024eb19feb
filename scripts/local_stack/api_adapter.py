"""The local stand-in for the deployed HTTP API: a real HTTP server on loopback.

    request ─► route (orchestrator/api_routes.py; none: 404 {"message": "Not Found"})
            ─► JWT authorizer, API Gateway's rules (autorizar_console.verification.verify:
               RS256, kid in the issuer's JWKS, signature, iss, aud/client_id, exp, nbf,
               iat; any failure: 401 {"message": "Unauthorized"}, and the function is
               never called)
            ─► the function's handler, in-process, with a payload-2.0 event whose
               ``requestContext.authorizer.jwt.claims`` are the verified claims rendered
               as API Gateway renders them (every value a string; an array as
               ``"[a b]"``) ─► its statusCode, headers, cookies and body
            (the console's pages: the deployed cookie authorizer's own code,
             verification.cookie_claims, on the ``cadencia_sessao`` cookie, its
             ``authorizer_context`` in ``requestContext.authorizer.lambda``; the sign-in
             page: no authorizer)

The JWKS is read from ``{issuer}/.well-known/jwks.json`` over HTTP (as API Gateway
and the cookie authorizer read Cognito's) and re-read when a token names an unknown key. Functions are called one
at a time (they run with the process environment set for them).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from autorizar_console import verification
from autorizar_console.verification import COOKIE_CONTEXT_CLAIMS as COOKIE_CONTEXT_CLAIMS
from autorizar_console.verification import TokenRefused
from autorizar_console.verification import claim_text as claim_text
from orchestrator.api_routes import AUTH_COOKIE, AUTH_NONE, CONSOLE_ROUTES, ROUTES, ApiRoute

Function = Callable[[dict[str, Any]], dict[str, Any]]
MAX_BODY_BYTES = 65_536
UNAUTHORIZED = {"message": "Unauthorized"}


def route_pattern(route: ApiRoute) -> re.Pattern[str]:
    parts = re.split(r"(\{[A-Za-z0-9_]+\})", route.path)
    regex = "".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(rf"\A{regex}\Z")


def api_event(route: ApiRoute, params: dict[str, str], *, method: str, path: str, query: str,
              headers: Mapping[str, str], body: str | None, claims: Mapping[str, Any] | None) -> dict[str, Any]:
    """A payload-2.0 event, as API Gateway builds it for a Lambda proxy integration."""
    now = time.time()
    authorizer: dict[str, Any] | None = None
    if claims and route.auth == AUTH_COOKIE:
        authorizer = {"lambda": verification.authorizer_context(claims)}
    elif claims:
        authorizer = {"jwt": {"claims": {k: claim_text(v) for k, v in claims.items()}, "scopes": None}}
    lowered = {k.lower(): v for k, v in headers.items()}
    cookies = [c.strip() for c in lowered.pop("cookie", "").split(";") if c.strip()]
    return {
        "version": "2.0", "routeKey": route.route_key, "rawPath": path, "rawQueryString": query,
        "headers": lowered, **({"cookies": cookies} if cookies else {}),
        "requestContext": {
            "accountId": "000000000000", "apiId": "local", "domainName": "127.0.0.1", "domainPrefix": "127",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
                     "userAgent": headers.get("User-Agent", "")},
            "requestId": uuid.uuid4().hex, "routeKey": route.route_key, "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)), "timeEpoch": int(now * 1000),
            **({"authorizer": authorizer} if authorizer else {}),
        },
        "pathParameters": params, "body": body, "isBase64Encoded": False,
        # As API Gateway renders them: a name given twice has its values joined by commas.
        **({"queryStringParameters": {k: ",".join(v) for k, v in urllib.parse.parse_qs(query).items()}}
           if query else {}),
    }


@dataclass
class Authorizer:
    issuer: str
    audiences: frozenset[str]
    now: Callable[[], float] = time.time
    key_set: verification.KeySet = field(init=False)

    def __post_init__(self) -> None:
        self.key_set = verification.KeySet(self.issuer)

    def cookie_claims(self, cookie_header: str | None) -> dict[str, Any]:
        """The console's cookie authorizer, the deployed one's code: one ``cadencia_sessao``
        cookie (none, or two: refused), the app client's access token by the same rules."""
        cookies = [c.strip() for c in (cookie_header or "").split(";") if c.strip()]
        return verification.cookie_claims(cookies, self.key_set, client_ids=self.audiences, now=self.now())

    def claims(self, authorization: str | None) -> dict[str, Any]:
        """Verified claims, or ``TokenRefused``. The header may hold the token with or
        without the ``Bearer`` prefix, as API Gateway accepts it."""
        if not authorization:
            raise TokenRefused("missing")
        token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else authorization.strip()
        return verification.verify_with(token, self.key_set, audiences=self.audiences, now=self.now())


def serve(authorizer: Authorizer, functions: Mapping[str, Function], port: int = 0,
          routes: tuple[ApiRoute, ...] = ROUTES + CONSOLE_ROUTES) -> ThreadingHTTPServer:
    """Listen on loopback in a daemon thread; the address is ``server.server_address``."""
    compiled = [(route, route_pattern(route)) for route in routes]
    one_at_a_time = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # request lines carry conversation ids
            return

        def _write(self, status: int, body: bytes | str, headers: Mapping[str, str],
                   cookies: list[str] | tuple[()] = ()) -> None:
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            for cookie in cookies:  # payload 2.0's ``cookies``: one Set-Cookie each
                self.send_header("Set-Cookie", cookie)
            for name, value in headers.items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, body: dict[str, Any]) -> None:
            self._write(status, json.dumps(body), {"Content-Type": "application/json"})

        def _handle(self, method: str) -> None:
            path, _, query = self.path.partition("?")
            found = next(((r, m) for r, p in compiled if r.method == method and (m := p.match(path))), None)
            if found is None:
                self._json(404, {"message": "Not Found"})
                return
            route, match = found
            try:
                claims: dict[str, Any] | None = (
                    None if route.auth == AUTH_NONE
                    else authorizer.cookie_claims(self.headers.get("Cookie")) if route.auth == AUTH_COOKIE
                    else authorizer.claims(self.headers.get("Authorization")))
            except TokenRefused:
                self._json(401, UNAUTHORIZED)
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                self._json(400, {"message": "Bad Request"})
                return
            if length > MAX_BODY_BYTES:
                self._json(413, {"message": "Request Entity Too Large"})
                return
            raw = self.rfile.read(length).decode(errors="replace") if length else None
            event = api_event(route, match.groupdict(), method=method, path=path, query=query,
                              headers=dict(self.headers.items()), body=raw, claims=claims)
            with one_at_a_time:
                answer = functions[route.function](event)
            self._write(int(answer.get("statusCode", 200)), answer.get("body") or "",
                        answer.get("headers") or {"Content-Type": "application/json"}, answer.get("cookies") or [])

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="api-adapter").start()
    return server

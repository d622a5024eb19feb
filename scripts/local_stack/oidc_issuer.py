"""A small OpenID issuer for the local stack: what Cognito is to the deployed API.

    GET  /.well-known/openid-configuration   issuer, jwks_uri, token_endpoint
    GET  /.well-known/jwks.json               the public half of its own RSA key (Cognito's
                                              path; also at /jwks.json)
    POST /token    grant_type=password&username=…&password=…&client_id=…
                   ─► an RS256 access token shaped like Cognito's (sub, iss, client_id,
                      token_use=access, username, cognito:groups, iat, nbf, exp)

Users come from a JSON file (``demo_users.json``: login, password, sub, groups). The
passwords there are demo passwords for a loopback-only server. MFA is Cognito's (the
deployed pool requires it); this issuer does not imitate it. The signing key is
generated per stack and kept in the stack's directory (mode 0600).
"""

from __future__ import annotations

import hmac
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from cryptography.hazmat.primitives.asymmetric import rsa

from . import jwt_rs256

DEMO_USERS = Path(__file__).with_name("demo_users.json")
TOKEN_TTL_S = 3600
MAX_FORM_BYTES = 4096


@dataclass(frozen=True)
class User:
    login: str
    password: str
    sub: str
    groups: tuple[str, ...]


def load_users(path: Path = DEMO_USERS) -> dict[str, User]:
    rows = json.loads(path.read_text())
    return {r["usuario"]: User(r["usuario"], r["senha"], r["sub"], tuple(r["grupos"])) for r in rows}


@dataclass
class Issuer:
    key: rsa.RSAPrivateKey
    users: dict[str, User]
    audience: str
    now: Callable[[], float]
    url: str = ""  # set once the server listens

    def jwks(self) -> dict[str, Any]:
        return {"keys": [jwt_rs256.jwk(self.key.public_key())]}

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.url, "jwks_uri": f"{self.url}/.well-known/jwks.json",
                "token_endpoint": f"{self.url}/token", "id_token_signing_alg_values_supported": ["RS256"],
                "grant_types_supported": ["password"]}

    def token_for(self, login: str, password: str, client_id: str) -> str | None:
        user = self.users.get(login)
        # Compared in constant time; an unknown login costs the same comparison.
        expected = user.password if user is not None else uuid.uuid4().hex
        if not hmac.compare_digest(password.encode(), expected.encode()) or user is None:
            return None
        if client_id != self.audience:
            return None
        now = int(self.now())
        return jwt_rs256.sign({"sub": user.sub, "iss": self.url, "client_id": client_id, "token_use": "access",
                               "username": user.login, "cognito:groups": list(user.groups),
                               "scope": "aws.cognito.signin.user.admin",
                               "iat": now, "nbf": now, "exp": now + TOKEN_TTL_S, "jti": uuid.uuid4().hex}, self.key)


def serve(issuer: Issuer, port: int = 0) -> ThreadingHTTPServer:
    """Listen on loopback in a daemon thread; ``issuer.url`` is set to the address."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # no request lines (they carry logins) in the logs
            return

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                self._answer(200, issuer.discovery())
            elif self.path in ("/.well-known/jwks.json", "/jwks.json"):
                self._answer(200, issuer.jwks())
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/token" or length > MAX_FORM_BYTES:
                self._answer(404 if self.path != "/token" else 413, {"error": "invalid_request"})
                return
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode(errors="replace")).items()}
            if form.get("grant_type") != "password":
                self._answer(400, {"error": "unsupported_grant_type"})
                return
            token = issuer.token_for(form.get("username", ""), form.get("password", ""), form.get("client_id", ""))
            if token is None:
                self._answer(400, {"error": "invalid_grant"})
                return
            self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": TOKEN_TTL_S})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    issuer.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True, name="oidc-issuer").start()
    return server

"""Rules of the codebase that a test can hold: tools never talk to a model,
configuration errors are clear, TLS is verified when the CA bundle is given."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from cadencia_shared.settings import DatabaseSettings

ROOT = Path(__file__).resolve().parents[1]


def test_no_tool_lambda_imports_anthropic():
    offenders = []
    for path in (ROOT / "functions").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "anthropic" or n.startswith("anthropic.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_database_settings_explain_what_is_missing():
    with pytest.raises(ValidationError, match="DB_HOST"):
        DatabaseSettings.from_env({"DB_USER": "u"})
    with pytest.raises(ValidationError, match="DB_PASSWORD"):
        DatabaseSettings.from_env({"DB_HOST": "h", "DB_USER": "u", "DB_AUTH": "password"})
    with pytest.raises(ValidationError, match="AWS_REGION"):
        DatabaseSettings.from_env({"DB_HOST": "h", "DB_USER": "u", "DB_AUTH": "iam"})


def test_iam_auth_verifies_the_server_unless_explicitly_opted_out():
    base = {"DB_HOST": "h", "DB_USER": "u", "DB_AUTH": "iam", "AWS_REGION": "us-east-1"}
    with pytest.raises(ValidationError, match="DB_SSL_ROOT_CERT"):
        DatabaseSettings.from_env(base)  # no silent sslmode=require: the token would go to whoever answers TLS
    with pytest.raises(ValidationError, match="DB_SSL_ROOT_CERT"):
        DatabaseSettings.from_env({**base, "DB_SSL_MODE": "verify-full"})
    with pytest.raises(ValidationError):
        DatabaseSettings.from_env({**base, "DB_SSL_MODE": "disable"})
    assert DatabaseSettings.from_env({**base, "DB_SSL_MODE": "require"}).sslmode == "require"
    assert DatabaseSettings.from_env({**base, "DB_SSL_ROOT_CERT": "/opt/global-bundle.pem"}).sslmode == "verify-full"


def test_iam_connection_signs_a_token_for_the_tools_own_user(monkeypatch):
    """The IAM path connects with a token generated for exactly DB_USER, over TLS."""
    from cadencia_shared import db

    seen = {}

    class FakeRds:
        def generate_db_auth_token(self, **kwargs):
            seen["token_args"] = kwargs
            return "signed-token"

    def fake_connect(**kwargs):
        seen["connect"] = kwargs
        return object()

    monkeypatch.setattr(db.psycopg, "connect", fake_connect)
    settings = DatabaseSettings.from_env({"DB_HOST": "erp.cluster.example", "DB_USER": "cadencia_agente_consulta",
                                          "DB_AUTH": "iam", "AWS_REGION": "sa-east-1",
                                          "DB_SSL_ROOT_CERT": "/opt/global-bundle.pem"})
    db.connect(settings, rds_client=FakeRds())
    assert seen["token_args"] == {"DBHostname": "erp.cluster.example", "Port": 5432,
                                  "DBUsername": "cadencia_agente_consulta", "Region": "sa-east-1"}
    assert seen["connect"]["password"] == "signed-token"
    assert seen["connect"]["user"] == "cadencia_agente_consulta"
    assert seen["connect"]["sslmode"] == "verify-full"
    assert seen["connect"]["sslrootcert"] == "/opt/global-bundle.pem"

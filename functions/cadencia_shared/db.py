"""A PostgreSQL connection as the calling tool's *own* database user.

In AWS each tool signs a short-lived IAM auth token for its user
(``rds-db:connect`` on that one ``dbuser`` ARN) and connects over TLS. Locally the
same function connects with a password. Either way the GRANTs of that user are
what the database enforces, so a bug in one tool cannot reach another tool's columns.

One connection is kept per (host, port, database, user) for the life of the
Lambda execution environment and replaced when it breaks: IAM tokens only matter
at connect time, so an open connection outlives its 15-minute token.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from .settings import DatabaseSettings, DbAuth

_connections: dict[tuple[str, int, str, str], psycopg.Connection] = {}
_lock = threading.Lock()


def _iam_token(settings: DatabaseSettings, rds_client: Any | None) -> str:
    if rds_client is None:
        import boto3  # deferred: only the IAM path needs it

        rds_client = boto3.client("rds", region_name=settings.region)
    # Signed locally with the function's credentials; no network call.
    return rds_client.generate_db_auth_token(
        DBHostname=settings.host, Port=settings.port, DBUsername=settings.user, Region=settings.region
    )


def connect(settings: DatabaseSettings, *, rds_client: Any | None = None) -> psycopg.Connection:
    """Open a new connection (no cache) as ``settings.user``."""
    if settings.auth is DbAuth.IAM:
        password = _iam_token(settings, rds_client)
    else:
        assert settings.password is not None  # enforced by DatabaseSettings
        password = settings.password.get_secret_value()
    options: dict[str, Any] = {"sslmode": settings.sslmode}
    if settings.ssl_root_cert:
        options["sslrootcert"] = settings.ssl_root_cert
    return psycopg.connect(
        host=settings.host,
        port=settings.port,
        dbname=settings.name,
        user=settings.user,
        password=password,
        connect_timeout=settings.connect_timeout_s,
        application_name=settings.user,
        **options,
    )


def connection(settings: DatabaseSettings, *, rds_client: Any | None = None) -> psycopg.Connection:
    """The cached connection for this user, reconnecting when it is closed or broken."""
    key = (settings.host, settings.port, settings.name, settings.user)
    with _lock:
        conn = _connections.get(key)
        if conn is None or conn.closed or conn.broken:
            conn = connect(settings, rds_client=rds_client)
            _connections[key] = conn
        elif conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            # A previous invocation died mid-transaction: never inherit its locks.
            conn.rollback()
        return conn


def close_all() -> None:
    """Close every cached connection (tests and the local stack's shutdown)."""
    with _lock:
        for conn in _connections.values():
            conn.close()
        _connections.clear()

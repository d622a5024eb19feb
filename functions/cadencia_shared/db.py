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
from typing import Any, Protocol, cast

import psycopg

from .settings import DatabaseSettings, DbAuth

_connections: dict[tuple[str, int, str, str, bool], psycopg.Connection] = {}
_lock = threading.Lock()


class RdsTokenSigner(Protocol):
    """The one RDS call made here, on a botocore client (built at run time: no static type)."""

    def generate_db_auth_token(self, *, DBHostname: str, Port: int, DBUsername: str, Region: str | None) -> str: ...


def _iam_token(settings: DatabaseSettings, rds_client: RdsTokenSigner | None) -> str:
    if rds_client is None:
        # Deferred: only the IAM path needs it. botocore, not boto3 (cadencia_shared.aws).
        from botocore.session import get_session

        rds_client = cast("RdsTokenSigner", get_session().create_client("rds", region_name=settings.region))
    # Signed locally with the function's credentials; no network call.
    return rds_client.generate_db_auth_token(
        DBHostname=settings.host, Port=settings.port, DBUsername=settings.user, Region=settings.region
    )


# A read-only session: every statement runs in its own implicit transaction
# (autocommit, so one SELECT is one round trip: no BEGIN/COMMIT around it) and the
# server refuses any write in it (default_transaction_read_only, sent in the
# startup packet: no extra round trip), whatever the user's GRANTs say.
READ_ONLY_OPTIONS = "-c default_transaction_read_only=on"


def connect(settings: DatabaseSettings, *, rds_client: RdsTokenSigner | None = None,
            read_only: bool = False) -> psycopg.Connection:
    """Open a new connection (no cache) as ``settings.user``; ``read_only``: see READ_ONLY_OPTIONS."""
    if settings.auth is DbAuth.IAM:
        password = _iam_token(settings, rds_client)
    else:
        assert settings.password is not None  # enforced by DatabaseSettings
        password = settings.password.get_secret_value()
    options: dict[str, Any] = {"sslmode": settings.sslmode}
    if settings.ssl_root_cert:
        options["sslrootcert"] = settings.ssl_root_cert
    if read_only:
        options["options"] = READ_ONLY_OPTIONS
    return psycopg.connect(
        host=settings.host,
        port=settings.port,
        dbname=settings.name,
        user=settings.user,
        password=password,
        connect_timeout=settings.connect_timeout_s,
        application_name=settings.user,
        autocommit=read_only,
        **options,
    )


def connection(settings: DatabaseSettings, *, rds_client: RdsTokenSigner | None = None,
               read_only: bool = False) -> psycopg.Connection:
    """The cached connection for this user, reconnecting when it is closed or broken."""
    key = (settings.host, settings.port, settings.name, settings.user, read_only)
    with _lock:
        conn = _connections.get(key)
        if conn is None or conn.closed or conn.broken:
            conn = connect(settings, rds_client=rds_client, read_only=read_only)
            _connections[key] = conn
        elif conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            # A previous invocation died mid-transaction: never inherit its locks.
            conn.rollback()
        return conn


def open_connections() -> list[psycopg.Connection]:
    """The cached connections (the benchmark traces what they send)."""
    with _lock:
        return [conn for conn in _connections.values() if not conn.closed]


def close_all() -> None:
    """Close every cached connection (tests and the local stack's shutdown)."""
    with _lock:
        for conn in _connections.values():
            conn.close()
        _connections.clear()

"""The DB-users custom resource's asset: its handler and the statements it may run.

The statements are generated at synth time from the repository's own ``sql/``
files (split into single statements for the RDS Data API) and shipped inside the
function's code as ``statements.json``; the custom resource's event carries only
their SHA-256. So the event can name which SQL to run, never what SQL to run.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import packaging
from .sqlsplit import split_statements

ROOT = Path(__file__).resolve().parents[1]
SQL_DIR = ROOT / "sql"
HANDLER_DIR = Path(__file__).resolve().parent / "db_users_cr"
ASSET_NAME = "cadencia-db-users"


def sql_statements(*names: str) -> list[str]:
    statements: list[str] = []
    for name in names:
        statements += split_statements((SQL_DIR / name).read_text())
    return statements


def statements_bundle(*, seed_demo_data: bool) -> bytes:
    """statements.json: what Create/Update ("apply") and Delete ("revoke") run."""
    apply = sql_statements("schema.sql", "grants.sql", *(["demo.sql"] if seed_demo_data else []))
    return json.dumps({"apply": apply, "revoke": sql_statements("revoke.sql")}, indent=1, sort_keys=True).encode()


@dataclass(frozen=True)
class DbUsersAsset:
    path: Path
    sql_sha256: str  # what the event names; the handler checks it against statements.json


def build_asset(*, seed_demo_data: bool) -> DbUsersAsset:
    """A content-addressed directory: handler.py + statements.json."""
    bundle = statements_bundle(seed_demo_data=seed_demo_data)
    handler = (HANDLER_DIR / "handler.py").read_bytes()
    digest = hashlib.sha256(bundle).hexdigest()
    content = hashlib.sha256(handler + b"\0" + bundle).hexdigest()[:16]
    final = packaging.build_dir() / "assets" / f"{ASSET_NAME}-{content}"
    if not (final / "statements.json").is_file():
        final.mkdir(parents=True, exist_ok=True)
        final.chmod(0o755)
        shutil.copyfile(HANDLER_DIR / "handler.py", final / "handler.py")
        tmp = final / ".statements.json.tmp"
        tmp.write_bytes(bundle)
        tmp.rename(final / "statements.json")  # last: its presence marks a complete directory
    return DbUsersAsset(final, digest)

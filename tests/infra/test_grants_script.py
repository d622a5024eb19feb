"""scripts/grants.sh (the imported-cluster path) applies and revokes the same SQL with psql."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _grants(info, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PGHOST": info.host, "PGPORT": str(info.port), "PGUSER": info.admin_user,
           "PGPASSWORD": info.admin_password, "PGDATABASE": info.dbname, "PGSSLMODE": "disable"}
    return subprocess.run(["bash", str(ROOT / "scripts" / "grants.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_apply_check_revoke(pg_cluster):
    dry = _grants(pg_cluster, "--with-schema", "--dry-run")
    assert dry.returncode == 0 and "would run: psql -v ON_ERROR_STOP=1 -f sql/schema.sql" in dry.stdout
    assert _grants(pg_cluster, "--check-absent").returncode == 0  # the dry run changed nothing

    applied = _grants(pg_cluster, "--with-schema")
    assert applied.returncode == 0, applied.stderr
    assert _grants(pg_cluster).returncode == 0  # idempotent
    present = _grants(pg_cluster, "--check-absent")
    assert present.returncode == 1 and "cadencia_agente_reembolso" in present.stdout
    shown = _grants(pg_cluster, "--check")
    assert shown.returncode == 0 and "cadencia_agente_consulta" in shown.stdout and "pedidos" in shown.stdout

    assert _grants(pg_cluster, "--revoke").returncode == 0
    assert _grants(pg_cluster, "--check-absent").returncode == 0
    assert _grants(pg_cluster, "--revoke").returncode == 0  # safe to run twice


def test_requires_a_target():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "grants.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "PGHOST" in proc.stderr


def test_without_a_ca_bundle_or_an_explicit_sslmode_nothing_connects(pg_cluster):
    env = {**os.environ, "PGHOST": pg_cluster.host, "PGPORT": str(pg_cluster.port), "PGUSER": pg_cluster.admin_user,
           "PGPASSWORD": pg_cluster.admin_password, "PGDATABASE": pg_cluster.dbname}
    env.pop("PGSSLMODE", None)
    env.pop("PGSSLROOTCERT", None)
    refused = subprocess.run(["bash", str(ROOT / "scripts" / "grants.sh"), "--check"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "PGSSLROOTCERT" in refused.stderr and refused.stdout == ""

#!/usr/bin/env bash
# grants.sh -- the database users and GRANTs of the three tools, applied with psql.
#
# For an IMPORTED cluster (database=imported): the CDK stack cannot reach inside an
# ERP database it does not own, so the users live outside CloudFormation and this
# script applies them, as Lab 87's grants-postgres.sh did. The demo cluster does the
# same through a custom resource (infra/db_users_cr), inside CloudFormation state.
# The SQL is the same files either way: sql/grants.sql (idempotent: the users'
# privileges end up exactly as listed) and sql/revoke.sql (drops the users).
#
# Usage:
#   scripts/grants.sh                 apply sql/grants.sql
#   scripts/grants.sh --with-schema   apply sql/schema.sql first (an empty database)
#   scripts/grants.sh --revoke        apply sql/revoke.sql (drop the three users)
#   scripts/grants.sh --check         show each user's privileges (\dp style)
#   scripts/grants.sh --check-absent  exit 1 if any of the three users still exists
#   add --dry-run to print what would run, --iam to log in with an IAM auth token
#
# Connection: the standard libpq variables. PGHOST (the cluster's writer endpoint)
# and PGUSER (an admin that may create roles) are required; PGDATABASE defaults to
# cadencia, PGPORT to 5432. Password: PGPASSWORD, or --iam (aws rds
# generate-db-auth-token; PGUSER needs rds_iam and the caller rds-db:connect).
# TLS: PGSSLROOTCERT=/path/global-bundle.pem verifies the server (verify-full). The
# admin's password or IAM token must not go to whoever answers TLS, so without it the
# script refuses, unless PGSSLMODE is set explicitly (e.g. require, on purpose).
# SQL runs as the cluster's master, which on RDS is not a superuser (see sql/revoke.sql).
set -euo pipefail
cd "$(dirname "$0")/.."

# The users' names come from the catalog (functions/cadencia_shared/catalog.py), the
# one place they are spelled in code; it imports nothing beyond the standard library.
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3
USERS=$(PYTHONPATH=functions "$PY" -c \
  'from cadencia_shared.catalog import DB_USERS; print(" ".join(DB_USERS))')
mode=apply; with_schema=0; dry_run=0; iam=0
for arg in "$@"; do
  case "$arg" in
    --with-schema) with_schema=1 ;;
    --revoke) mode=revoke ;;
    --check) mode=check ;;
    --check-absent) mode=check-absent ;;
    --dry-run) dry_run=1 ;;
    --iam) iam=1 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "grants.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

: "${PGHOST:?set PGHOST to the cluster endpoint}"
: "${PGUSER:?set PGUSER to an admin user}"
export PGDATABASE="${PGDATABASE:-cadencia}" PGPORT="${PGPORT:-5432}"
if [ -z "${PGSSLMODE:-}" ]; then
  if [ -z "${PGSSLROOTCERT:-}" ]; then
    echo "grants.sh: set PGSSLROOTCERT to the RDS CA bundle (global-bundle.pem) to verify the server," \
         "or set PGSSLMODE explicitly (docs/infrastructure.md, 'The RDS CA bundle')" >&2
    exit 2
  fi
  export PGSSLMODE=verify-full
fi

files=()
case "$mode" in
  apply) [ "$with_schema" = 1 ] && files+=(sql/schema.sql); files+=(sql/grants.sql) ;;
  revoke) files+=(sql/revoke.sql) ;;
esac

say() { printf '[grants] %s\n' "$*"; }
say "target: $PGUSER@$PGHOST:$PGPORT/$PGDATABASE (sslmode=$PGSSLMODE)"
if [ "$dry_run" = 1 ]; then
  case "$mode" in
    apply|revoke) for f in "${files[@]}"; do say "would run: psql -v ON_ERROR_STOP=1 -f $f"; done ;;
    *) say "would query pg_roles for: $USERS" ;;
  esac
  exit 0
fi

command -v psql >/dev/null || { echo "grants.sh: psql not found (Debian: postgresql-client)" >&2; exit 1; }
if [ "$iam" = 1 ]; then
  PGPASSWORD=$(aws rds generate-db-auth-token --hostname "$PGHOST" --port "$PGPORT" --username "$PGUSER")
  export PGPASSWORD
fi

psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
in_list=""
for u in $USERS; do in_list="${in_list:+$in_list,}'$u'"; done

case "$mode" in
  apply|revoke)
    for f in "${files[@]}"; do say "applying $f"; psql_ -f "$f"; done
    ;;
  check)
    psql_ -c "SELECT rolname AS usuario, rolcanlogin AS login FROM pg_roles WHERE rolname IN ($in_list) ORDER BY 1"
    psql_ -c '\dp pedidos' -c '\dp clientes' -c '\dp reembolsos'
    ;;
  check-absent)
    remaining=$(psql_ -At -c "SELECT string_agg(rolname, ' ' ORDER BY rolname) FROM pg_roles WHERE rolname IN ($in_list)")
    if [ -n "$remaining" ]; then say "users still present: $remaining"; exit 1; fi
    say "none of the three users exists"
    ;;
esac

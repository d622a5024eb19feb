#!/usr/bin/env bash
# One-time (and idempotent) set-up of a fresh machine for this repository:
#   1. a Python virtual environment with the exact versions in requirements.lock;
#   2. PostgreSQL server binaries (Debian package) for the local stack and the tests;
#   3. Chromium and chromium-driver (the console's browser tests);
#   4. the CDK CLI and its node packages (package-lock.json), used by `npx cdk`.
# Each step is skipped when it is already satisfied, so running it twice is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

# 1. Python environment -------------------------------------------------------
lock_sum=$(sha256sum requirements.lock | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
  step "creating .venv and installing requirements.lock (exact pins)"
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip==25.3"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.lock
  .venv/bin/python -m pip check
  echo "$lock_sum" > .venv/.lock-sha256
else
  step "python environment up to date"
fi

# 2. PostgreSQL server binaries ----------------------------------------------
if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1; then
  step "postgresql binaries present"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing postgresql (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
else
  echo "PostgreSQL server binaries not found: install the 'postgresql' package," >&2
  echo "or point CADENCIA_PG_DSN at an existing server (see docs/local-stack.md)." >&2
  exit 1
fi

# 2b. Chromium and its driver, for the operators' console's browser tests ---
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  step "chromium and chromium-driver present"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing chromium and chromium-driver (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver </dev/null >/dev/null
else
  echo "chromium/chromedriver not found: the console's browser tests will be skipped" >&2
  echo "(install Debian's 'chromium' and 'chromium-driver' packages to run them)." >&2
fi

# 3. CDK CLI (local npm dev dependency) --------------------------------------
if [ -f package-lock.json ]; then
  npm_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
  if [ ! -d node_modules ] || [ "$(cat node_modules/.lock-sha256 2>/dev/null)" != "$npm_sum" ]; then
    step "installing node packages (npm ci)"
    npm ci --silent --no-audit --no-fund
    echo "$npm_sum" > node_modules/.lock-sha256
  else
    step "node packages up to date"
  fi
fi

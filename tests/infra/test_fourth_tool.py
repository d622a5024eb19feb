"""docs/architecture.md's "How to add a tool", followed by a test: a throwaway fourth
tool (``consultar_rastreio``, read-only) added to a copy of the tree as exactly three
things — its package, its registry row, its contract row — then the derived files
regenerated (``python -m infra.derived --write``) and the registry-driven checks run
on the copy: the import contracts (and one that must break), the model's tool
definition, the synthesized template against the contract, and the new DB user's
privileges on a real PostgreSQL against its contract row.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from infra import packaging
from tests.test_db_privileges import catalog_privileges, column_privileges

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "consultar_rastreio"
DB_USER = "cadencia_agente_rastreio"

FILES = {
    "__init__.py": '"""``consultar_rastreio``: the tracking code of the customer\'s own order."""\n',
    "models.py": (
        "from cadencia_shared.catalog import TrackingArguments\n"
        "from cadencia_shared.models import ToolRequest\n\n\n"
        "class TrackingRequest(ToolRequest, TrackingArguments):\n"
        '    """The model\'s arguments plus the identity the orchestrator injects."""\n'
    ),
    "repository.py": (
        "from psycopg.rows import dict_row\n\n\n"
        "def fetch_tracking(conn, *, order_id, customer_id):\n"
        "    with conn.cursor(row_factory=dict_row) as cur:\n"
        '        return cur.execute("SELECT id, codigo_rastreio FROM pedidos WHERE id = %s AND cliente_id = %s",\n'
        "                           (order_id, customer_id)).fetchone()\n"
    ),
    "logic.py": (
        "from cadencia_shared.results import ErrorCode, ToolError, ToolResponse\n\n"
        'TOOL = "consultar_rastreio"\n\n\n'
        "def tracking(req, fetch):\n"
        "    row = fetch(order_id=req.pedidoId, customer_id=req.clienteId)\n"
        "    if row is None:\n"
        '        raise ToolError(ErrorCode.ORDER_NOT_FOUND,'
        ' f"Pedido {req.pedidoId} não encontrado para este cliente.")\n'
        '    return ToolResponse.success(TOOL, "consultado", {"pedidoId": row["id"], '
        '"codigoRastreio": row["codigo_rastreio"]})\n'
    ),
    "handler.py": (
        "from functools import partial\n\n"
        "from cadencia_shared import db\n"
        "from cadencia_shared.tool_edge import tool_handler\n"
        "from cadencia_shared.observability import logger_for\n"
        "from cadencia_shared.settings import DatabaseSettings\n\n"
        "from .logic import TOOL, tracking\n"
        "from .models import TrackingRequest\n"
        "from .repository import fetch_tracking\n\n"
        "logger = logger_for(TOOL)\n\n\n"
        "@tool_handler(tool=TOOL, model=TrackingRequest, logger=logger)\n"
        "def lambda_handler(request):\n"
        "    conn = db.connection(DatabaseSettings.from_env(), read_only=True)\n"
        "    return tracking(request, partial(fetch_tracking, conn))\n"
    ),
    "grants.sql": f"-- {DB_USER}: the tracking code of the customer's own order.\n"
                  f"GRANT SELECT (id, cliente_id, codigo_rastreio) ON pedidos TO {DB_USER};\n",
}

# The registry row is the status tool's, copied and renamed, as a newcomer would start.
RENAMES = {
    "OrderStatusArguments": "TrackingArguments",
    "CONSULTAR_STATUS_PEDIDO": "CONSULTAR_RASTREIO",
    '"consultar_status_pedido"': '"consultar_rastreio"',
    '"cadencia-consultar-status-pedido"': '"cadencia-consultar-rastreio"',
    '"cadencia_agente_consulta"': '"cadencia_agente_rastreio"',
    "Consulta o status de um pedido": "Consulta o código de rastreio de um pedido",
}


def _registry_row(catalog_text: str) -> str:
    start = catalog_text.index("class OrderStatusArguments(")
    row = catalog_text[start:catalog_text.index("\n)\n", start) + 3]
    for old, new in RENAMES.items():
        assert old in row, old
        row = row.replace(old, new)
    return "\n\n" + row


CONTRACT_ROW = '''    ToolRole("consultar_rastreio", "consultar_rastreio", "cadencia-consultar-rastreio",
             "cadencia-agente-rastreio-role", "cadencia_agente_rastreio",
             db_privileges=("SELECT (id, cliente_id, codigo_rastreio) ON pedidos",)),
'''

DERIVED = {"sql/grants.sql", "sql/revoke.sql", ".importlinter", "docs/access-matrix.md"}


def _copy_tree(dst: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dst / name)


def _snapshot(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in tree.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: {old!r}"
    path.write_text(text.replace(old, new))


def _add_the_fourth_tool(tree: Path) -> None:
    package = tree / "functions" / PACKAGE
    package.mkdir()
    for name, text in FILES.items():
        (package / name).write_text(text)
    catalog = tree / "functions" / "cadencia_shared" / "catalog.py"
    row = _registry_row(catalog.read_text())
    _replace_once(catalog, "\nTOOLS: dict[str, ToolSpec] = ", row + "\nTOOLS: dict[str, ToolSpec] = ")
    _replace_once(catalog, "ATUALIZAR_CADASTRO)}", "ATUALIZAR_CADASTRO, CONSULTAR_RASTREIO)}")
    _replace_once(tree / "infra" / "contract.py", "\n)\nTOOL_FUNCTION_ARNS",
                  "\n" + CONTRACT_ROW + ")\nTOOL_FUNCTION_ARNS")


def _run(tree: Path, *args: str, check: bool = True, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'functions'}", "PYTHONDONTWRITEBYTECODE": "1",
           **env_vars}
    return subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, check=check, timeout=1200)


CHECKS = r'''
import json, sys
from pathlib import Path
from orchestrator import tools
from infra import contract
from infra.policy_check import compare
from tests.infra.conftest import synthesize

definitions = {d["name"]: d for d in tools.definitions(strict=True)}
schema = definitions["consultar_rastreio"]["input_schema"]
assert schema["required"] == ["pedidoId"] and schema["additionalProperties"] is False, schema
assert tools.validation_errors("consultar_rastreio", {"pedidoId": "4821"}) == []
assert tools.validation_errors("consultar_rastreio", {"pedidoId": 4821}), "a number is not an order id"
assert tools.validation_errors("consultar_rastreio", {"pedidoId": "4821\n"}), "anchored pattern"
synth = synthesize({}, Path(sys.argv[1]))
diffs = compare(synth.template, contract.build(synth.config))
assert not diffs, "\n".join(d.describe() for d in diffs)
functions = {r["Properties"].get("FunctionName"): r["Properties"]
             for r in synth.of_type("AWS::Lambda::Function").values()}
tracking = functions["cadencia-consultar-rastreio"]
assert tracking["Handler"] == "consultar_rastreio.handler.lambda_handler" and tracking["Timeout"] == 5, tracking
assert tracking["ReservedConcurrentExecutions"] == 10 and "VpcConfig" in tracking, tracking
print(json.dumps({t.db_user: list(t.db_privileges) for t in contract.TOOL_ROLES}))
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fourth-tool") / "repo"
    _copy_tree(root)
    return root


def test_a_fourth_tool_is_its_package_a_registry_row_and_a_contract_row(tree, tmp_path, pg_cluster):
    before = _snapshot(tree)
    _add_the_fourth_tool(tree)
    regenerated = _run(tree, sys.executable, "-m", "infra.derived", "--write").stdout
    changed = {name for name, digest in _snapshot(tree).items() if before.get(name) != digest}
    written = {name for name in changed if not name.startswith(f"functions/{PACKAGE}/")}
    assert written == {"functions/cadencia_shared/catalog.py", "infra/contract.py"} | DERIVED, regenerated
    assert _run(tree, sys.executable, "-m", "infra.derived", "--check").returncode == 0

    # The import contracts know the new package: kept as written, broken by a cross-tool import.
    lint = [str(ROOT / ".venv" / "bin" / "lint-imports"), "--no-cache"]
    assert _run(tree, *lint, check=False).returncode == 0
    logic = tree / "functions" / PACKAGE / "logic.py"
    logic.write_text(logic.read_text() + "\nimport emitir_reembolso.gateway  # noqa: E402,F401\n")
    broken = _run(tree, *lint, check=False)
    assert broken.returncode != 0 and "Tool packages are independent" in broken.stdout, broken.stdout
    logic.write_text(logic.read_text().split("\nimport emitir_reembolso")[0] + "\n")

    # The orchestrator and the synthesized template follow the rows (build dir: its own, the
    # third-party dependencies shared with this session's cache).
    build = tmp_path / "build"
    build.mkdir()
    shared_deps = packaging.build_dir() / "deps"  # this session's cache (CADENCIA_BUILD_DIR or .build)
    if shared_deps.is_dir():
        (build / "deps").symlink_to(shared_deps)
    checked = _run(tree, sys.executable, "-c", CHECKS, str(tmp_path / "cdk.out"), check=False,
                   CADENCIA_BUILD_DIR=str(build))
    assert checked.returncode == 0, checked.stderr[-3000:]
    contract_rows = json.loads(checked.stdout.strip().splitlines()[-1])

    # The generated SQL creates the new user with exactly its contract row's privileges.
    with psycopg.connect(pg_cluster.admin_conninfo(), autocommit=True) as admin:
        for name in ("schema.sql", "grants.sql", "grants.sql", "revoke.sql", "grants.sql"):
            admin.execute((tree / "sql" / name).read_text())
        try:
            for user, privileges in contract_rows.items():
                found = catalog_privileges(admin, user)
                assert found == {"table": set(), "columns": column_privileges(tuple(privileges))}, user
            password = secrets.token_urlsafe(12)  # local only: in AWS the user logs in with IAM tokens
            admin.execute(sql.SQL("ALTER USER {} PASSWORD {}").format(sql.Identifier(DB_USER), sql.Literal(password)))
            with psycopg.connect(make_conninfo(pg_cluster.admin_conninfo(), user=DB_USER, password=password)) as conn:
                conn.execute("SELECT codigo_rastreio FROM pedidos WHERE cliente_id = 1")
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT status FROM pedidos")
        finally:
            admin.execute((tree / "sql" / "revoke.sql").read_text())

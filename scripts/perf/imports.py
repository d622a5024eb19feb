"""Import time of each handler as a ratio to its bare dependencies, and asset sizes.

A handler's *bare dependencies* are the third-party modules its own code imports
at load time, read from ``python -X importtime`` (a third-party module whose
parent in the import tree is first-party code, or the top). Both are timed in
fresh interpreters (``-c``: a clock around the import statement), median of N.
The orchestrator is also compared with ``anthropic`` alone (issue 14's goal).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("cadencia_shared", "consultar_status_pedido", "emitir_reembolso", "atualizar_cadastro",
               "orchestrator", "canal_whatsapp", "conciliar_reembolsos", "decidir_aprovacao")
HANDLERS = {
    "cadencia-consultar-status-pedido": "consultar_status_pedido.handler",
    "cadencia-emitir-reembolso": "emitir_reembolso.handler",
    "cadencia-atualizar-cadastro": "atualizar_cadastro.handler",
    "cadencia-orquestrador": "orchestrator.handler",
}
_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


@dataclass
class ImportRow:
    function: str
    module: str
    bare: tuple[str, ...]
    handler_ms: float
    bare_ms: float
    anthropic_ms: float | None = None

    @property
    def ratio(self) -> float:
        return self.handler_ms / self.bare_ms


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT}", "POWERTOOLS_LOG_LEVEL": "INFO"}


def _timed(statement: str, python: str = sys.executable, env: dict[str, str] | None = None) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env or _env(), check=True)
    return float(out.stdout.strip().splitlines()[-1]) * 1000


def median_ms(statement: str, runs: int, **kwargs: object) -> float:
    _timed(statement, **kwargs)  # warm the OS cache (and write our .pyc once)
    values = sorted(_timed(statement, **kwargs) for _ in range(runs))
    return values[len(values) // 2]


def bare_dependencies(module: str) -> tuple[str, ...]:
    """Third-party modules that first-party code (or the top) imports directly."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                         capture_output=True, text=True, env=_env(), check=True).stderr
    lines = [m for m in (_LINE.match(line) for line in out.splitlines()) if m]
    direct: list[str] = []
    # -X importtime prints a module after its children: walk backwards to know parents.
    stack: list[tuple[int, str]] = []
    for match in reversed(lines):
        depth, name = len(match.group(3)) // 2, match.group(4)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else None
        stack.append((depth, name))
        top = name.split(".")[0]
        third_party = top not in FIRST_PARTY and top not in sys.stdlib_module_names and top != "__future__"
        parent_first = parent is None or parent.split(".")[0] in FIRST_PARTY
        if third_party and parent_first and not (parent is None and depth > 0):
            direct.append(name)
    # keep only what the handler's import reaches (not site's start-up imports)
    return tuple(sorted(set(direct)))


def measure_all(*, runs: int, progress: Callable[[str], None]) -> list[ImportRow]:
    rows = []
    anthropic_ms = median_ms("import anthropic", runs)
    for function, module in HANDLERS.items():
        progress(f"  {function}")
        bare = bare_dependencies(module)
        handler_ms = median_ms(f"import {module}", runs)
        bare_ms = median_ms("import " + ", ".join(bare), runs) if bare else float("nan")
        rows.append(ImportRow(function, module, bare, handler_ms, bare_ms,
                              anthropic_ms if module.startswith("orchestrator") else None))
    return rows


@dataclass
class AssetSize:
    name: str
    unzipped: int
    zipped: int
    files: int
    bytecode: bool


def zipped_size(path: Path) -> int:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            archive.write(file, file.relative_to(path).as_posix())
    return buffer.tell()


def asset_sizes(progress: Callable[[str], None]) -> list[AssetSize]:
    from infra import packaging
    from infra.app import asset_specs

    built = packaging.build_all(asset_specs(), lambda m: progress(m), allow_unverified_db_tls=True)
    return [AssetSize(name, a.size_bytes, zipped_size(a.path), a.files, any(a.path.rglob("*.pyc")))
            for name, a in built.items()]

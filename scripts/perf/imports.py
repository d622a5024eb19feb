"""Import time of each handler as a ratio to its bare dependencies, and asset sizes.

A handler's *bare dependencies* are the third-party modules its own code imports
at load time, read from ``python -X importtime`` (a third-party module whose
parent in the import tree is first-party code, or the top). Both are timed in
fresh interpreters (``-c``: a CPU clock around the import statement), alternately,
median of N pairs.
The orchestrator is also compared with ``anthropic`` alone (the orchestrator's import goal: docs/performance.md).
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
    ratio: float  # median of the pairwise ratios
    anthropic_ms: float | None = None
    anthropic_ratio: float | None = None


def _env() -> dict[str, str]:
    # Without PYTHONDONTWRITEBYTECODE (a developer's or CI's shell may set it): the
    # warm-up run must write the first-party .pyc, as the assets ship them, or every
    # timed import would compile the modules changed since the last write.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT}", "POWERTOOLS_LOG_LEVEL": "INFO"}


def _timed(statement: str, python: str = sys.executable, env: dict[str, str] | None = None) -> float:
    """CPU milliseconds of ``statement`` in a fresh interpreter (CPU, not wall time: on
    a shared machine another job's load stretches wall time, not this process's CPU)."""
    code = f"import time; t = time.process_time(); {statement}; print(time.process_time() - t)"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env or _env(), check=True)
    return float(out.stdout.strip().splitlines()[-1]) * 1000


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def paired_ms(first: str, second: str, runs: int, **kwargs: object) -> tuple[float, float, float]:
    """Medians of ``first`` and ``second``, run alternately (A B A B …), and the
    median of the pairwise ratios: a drift of the machine's speed hits both alike."""
    _timed(first, **kwargs)  # warm the OS cache (and write our .pyc once)
    _timed(second, **kwargs)
    pairs = [(_timed(first, **kwargs), _timed(second, **kwargs)) for _ in range(runs)]
    return _median([a for a, _ in pairs]), _median([b for _, b in pairs]), _median([a / b for a, b in pairs])


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
    for function, module in HANDLERS.items():
        progress(f"  {function}")
        bare = bare_dependencies(module)
        handler_ms, bare_ms, ratio = paired_ms(f"import {module}", "import " + ", ".join(bare), runs)
        row = ImportRow(function, module, bare, handler_ms, bare_ms, ratio)
        if module.startswith("orchestrator"):
            _, row.anthropic_ms, row.anthropic_ratio = paired_ms(f"import {module}", "import anthropic", runs)
        rows.append(row)
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


@dataclass
class BytecodeRow:
    function: str
    python: str
    without_ms: float
    with_ms: float
    ratio: float  # without / with, median of pairs


# The two heaviest handlers, installed for THIS machine's platform with the
# runtime's Python (the assets hold aarch64 code this x86_64 machine cannot load).
BYTECODE_CASES = (
    ("cadencia-orquestrador", "lambda-orchestrator.txt", "orchestrator.handler", ("orchestrator", "cadencia_shared")),
    ("cadencia-emitir-reembolso", "lambda-refund.txt", "emitir_reembolso.handler",
     ("emitir_reembolso", "cadencia_shared")),
)


def _lock_pin(name: str) -> str:
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.strip()
    raise KeyError(name)


def _requirement_set(requirements: str) -> str:
    """What a host tree is installed from: the function's requirements file and the lock, by content."""
    import hashlib

    digest = hashlib.sha256()
    for path in (ROOT / "requirements" / requirements, ROOT / "requirements.lock"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _host_tree(python: str, requirements: str, packages: tuple[str, ...], where: Path) -> Path:
    """Dependencies (+ boto3, which the runtime provides) and our packages, no bytecode."""
    import shutil

    deps = where.with_name(where.name + "-deps")
    # The cache is kept while the requirement set is the one it was installed from: a
    # requirements file that gained a package (cryptography, for SEAL) reinstalls it.
    wanted = _requirement_set(requirements)
    marker = deps / ".complete"
    if not marker.exists() or marker.read_text() != wanted:
        shutil.rmtree(deps, ignore_errors=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
                        "--target", str(deps), "-c", str(ROOT / "requirements.lock"),
                        "-r", str(ROOT / "requirements" / requirements), _lock_pin("boto3")],
                       check=True, capture_output=True)
        marker.write_text(wanted)
    shutil.rmtree(where, ignore_errors=True)
    shutil.copytree(deps, where, ignore=shutil.ignore_patterns("__pycache__", ".complete"))
    for package in packages:
        source = ROOT / ("functions" if package != "orchestrator" else "") / package
        shutil.copytree(source, where / package, ignore=shutil.ignore_patterns("__pycache__"))
    return where


def bytecode_effect(*, runs: int, progress: Callable[[str], None]) -> list[BytecodeRow]:
    """Cold import of a handler tree without any .pyc (what a --no-compile asset does
    on every cold start) vs the same tree compiled as packaging compiles the assets."""
    import shutil

    from infra import packaging

    bytecode = packaging.runtime_python()
    if bytecode.python is None:
        progress(f"  no python{packaging.LAMBDA_PYTHON_VERSION}: bytecode effect not measured")
        return []
    rows = []
    base = packaging.build_dir() / "bench-host" / bytecode.version
    for function, requirements, module, packages in BYTECODE_CASES:
        progress(f"  {function} on python {bytecode.version} (first run installs its dependencies)")
        plain = _host_tree(bytecode.python, requirements, packages, base / function)
        compiled = plain.with_name(plain.name + "-pyc")
        shutil.rmtree(compiled, ignore_errors=True)
        shutil.copytree(plain, compiled)
        packaging.compile_tree(compiled, bytecode)

        def env(tree: Path) -> dict[str, str]:
            return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1",
                    "POWERTOOLS_LOG_LEVEL": "INFO", "AWS_REGION": "us-east-1"}

        pairs = []
        for _ in range(runs):
            pairs.append((_timed(f"import {module}", bytecode.python, env(plain)),
                          _timed(f"import {module}", bytecode.python, env(compiled))))
        rows.append(BytecodeRow(function, bytecode.version, _median([a for a, _ in pairs]),
                                _median([b for _, b in pairs]), _median([a / b for a, b in pairs])))
    return rows

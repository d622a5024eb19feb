"""Bytecode for the Lambda runtime's Python (see infra/packaging.py's docstring).

The runtime cannot write to /var/task, so an asset without ``__pycache__``
compiles every module it imports on each cold start. The .pyc files must come
from an interpreter of the runtime's minor version; this module finds one and
compiles a tree with it, reproducibly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_TASK_ROOT = "/var/task"  # where Lambda unpacks the asset: the paths the .pyc files name


class BytecodeError(RuntimeError):
    pass


@dataclass(frozen=True)
class Bytecode:
    """How the asset's .pyc files are made: by ``python`` (None: no bytecode)."""

    python: str | None
    version: str  # the compiling interpreter's full version, part of the hash

    @property
    def key(self) -> str:
        return f"bytecode:{self.version}:unchecked-hash" if self.python else "bytecode:none"


def _python_version(python: str) -> str | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _candidates() -> Iterable[str]:
    override = os.environ.get("CADENCIA_LAMBDA_PYTHON")
    if override:
        yield override
        return
    found = shutil.which(f"python{LAMBDA_PYTHON_VERSION}")
    if found:
        yield found
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    yield from (str(p) for p in sorted(pyenv_root.glob(f"versions/{LAMBDA_PYTHON_VERSION}.*/bin/python"
                                                       f"{LAMBDA_PYTHON_VERSION}"), reverse=True))


def runtime_python() -> Bytecode:
    """An interpreter of the Lambda runtime's minor version, to compile the asset."""
    for python in _candidates():
        version = _python_version(python)
        if version and version.rsplit(".", 1)[0] == LAMBDA_PYTHON_VERSION:
            return Bytecode(python, version)
    return Bytecode(None, "none")


# A fixed hash seed: the order of a frozenset constant in a .pyc follows the string
# hashes, which are randomized per process otherwise.
_COMPILE_ENV = {**os.environ, "PYTHONHASHSEED": "0"}


def compile_tree(tree: Path, bytecode: Bytecode, *, only: str | None = None) -> None:
    """Write ``__pycache__`` for every module under ``tree`` (or its directory
    ``only``), as the runtime would (its cache tag, e.g. cpython-312), paths
    rewritten from ``tree`` to LAMBDA_TASK_ROOT."""
    if bytecode.python is None:
        return
    # One process, files in compileall's sorted order: marshal's output of a module depends on
    # what its process compiled before (shared references), so a worker pool (-j 0) made
    # a module's .pyc differ between two builds of the same tree.
    proc = subprocess.run(
        [bytecode.python, "-m", "compileall", "-q", "-j", "1", "--invalidation-mode", "unchecked-hash",
         "-s", str(tree), "-p", LAMBDA_TASK_ROOT, str(tree / only if only else tree)],
        capture_output=True, text=True, env=_COMPILE_ENV)
    # compileall exits 1 when a file does not compile (test data some wheels ship for
    # other Python versions); Lambda would never import those, so only a crash counts.
    if proc.returncode not in (0, 1) or "Traceback" in proc.stderr:
        raise BytecodeError(f"compileall failed in {tree}:\n{proc.stderr or proc.stdout}")

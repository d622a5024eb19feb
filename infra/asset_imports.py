"""What a Lambda's code imports, read from the code (not from a list someone keeps).

Starting at the handler module, every first-party module it imports is parsed
(``ast``: top-level and deferred imports inside functions alike, relative imports
resolved) and followed; every other top-level module name is collected. The
third-party names must then be in the built asset, or be one of the few the Lambda
Python runtime provides (boto3, botocore, s3transfer: the runtime's SDK, which
packaging refuses to bundle). urllib3 is deliberately NOT counted as provided: the
runtime has it only as botocore's dependency, at a version the project does not
choose, so a function that imports it declares and bundles it.

No third-party tool does this offline for a foreign platform (modulefinder would
walk every installed package with this machine's interpreter), hence this module.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})


@dataclass
class ImportGraph:
    first_party: set[str] = field(default_factory=set)  # modules parsed, dotted names
    third_party: dict[str, set[str]] = field(default_factory=dict)  # top-level name -> importing modules


def _module_file(name: str, roots: Iterable[Path]) -> Path | None:
    parts = name.split(".")
    for root in roots:
        package = root.joinpath(*parts, "__init__.py")
        if package.is_file():
            return package
        module = root.joinpath(*parts[:-1], parts[-1] + ".py")
        if module.is_file():
            return module
    return None


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterable[str]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            yield prefix
            # "from pkg import sub" may name a submodule: try each as one.
            yield from (f"{prefix}.{alias.name}" for alias in node.names if alias.name != "*")


def import_graph(entry: str, packages: Iterable[Path]) -> ImportGraph:
    """Follow ``entry``'s imports through the asset's own ``packages`` (directories or .py files)."""
    packages = list(packages)
    roots = list(dict.fromkeys(p.parent for p in packages))
    first_party_tops = {p.name.removesuffix(".py") for p in packages}
    graph = ImportGraph()
    pending = [entry]
    while pending:
        module = pending.pop()
        if module in graph.first_party:
            continue
        path = _module_file(module, roots)
        if path is None:
            continue  # a name in "from x import y" that is an attribute, not a module
        graph.first_party.add(module)
        tree = ast.parse(path.read_text(), filename=str(path))
        for name in _imported_names(tree, module, path.name == "__init__.py"):
            top = name.split(".")[0]
            if not top or top == "__future__" or top in sys.stdlib_module_names:
                continue
            if top in first_party_tops:
                parts = name.split(".")  # importing a.b.c runs a, a.b and a.b.c
                pending.extend(".".join(parts[: i + 1]) for i in range(len(parts)))
                continue
            graph.third_party.setdefault(top, set()).add(module)
    return graph


def in_asset(name: str, asset: Path) -> bool:
    """A top-level module present in the asset: a package, a module or an extension."""
    return ((asset / name).is_dir() or (asset / f"{name}.py").is_file()
            or any(asset.glob(f"{name}.*.so")) or any(asset.glob(f"{name}.so")))


def missing_from_asset(graph: ImportGraph, asset: Path) -> dict[str, set[str]]:
    return {name: importers for name, importers in graph.third_party.items()
            if name not in RUNTIME_PROVIDED and not in_asset(name, asset)}

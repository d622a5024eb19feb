"""Figures in README.md and docs/ that a script measures: generated blocks, never hand-typed.

A measured figure lives between ``<!-- BEGIN generated:NAME -->`` and
``<!-- END generated:NAME -->``. The script that measures it stores its run as a
result file (``docs/results/NAME.json``) and the block is rendered from that file
by the same code that prints the run; ``python -m scripts.doc_blocks --check``
(and tests/test_doc_blocks.py) renders every block again from its stored source and
fails when the doc differs, so a figure edited by hand, a renderer changed without
the doc, or a block nobody owns is found. Nothing is measured here: the check only
re-renders (the benchmarks take minutes).

    scripts/bench.py --write-docs                 # measures, stores bench.json, rewrites the block
    scripts/confiabilidade.py --write-docs        # the same for the reliability figures
    python -m scripts.harness.comparar resultados/resultado-minima.json resultados/resultado-producao.json --write-docs
    python -m scripts.doc_blocks --write|--check  # re-render every block from its stored source

The access matrix is rendered from the least-privilege contract (``infra/contract.py``);
``infra/derived.py`` writes it with the other registry-derived files.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for entry in (str(ROOT / "functions"), str(ROOT)):  # `python -m scripts.doc_blocks` from a checkout, no PYTHONPATH
    if entry not in sys.path:
        sys.path.insert(0, entry)
RESULTS = "docs/results"
_BLOCK = re.compile(r"<!-- BEGIN generated:(?P<name>[a-z0-9-]+) -->\n(?P<body>.*?)<!-- END generated:(?P=name) -->",
                    re.S)
_MARKER = re.compile(r"<!-- (BEGIN|END) generated:([a-z0-9-]+) -->")


class DocBlockError(ValueError):
    """A doc's generated blocks do not match what is registered here."""


def _render_bench(data: dict[str, Any]) -> str:
    from scripts.perf import report, stored

    return report.render(*stored.load(data))


def _render_reliability(data: dict[str, Any]) -> str:
    from scripts.reliability import report
    from scripts.reliability.run import Figures

    return report.markdown(Figures.from_json(data))


def _render_prova(data: dict[str, Any]) -> str:
    from scripts.harness import report

    return report.comparison_markdown(data["summaries"])


def _render_access_matrix(_: dict[str, Any]) -> str:
    from infra import access_matrix

    return access_matrix.render_markdown()


@dataclass(frozen=True)
class Block:
    name: str
    doc: str  # the file holding the block, from the repository's root
    source: str | None  # the stored result file (None: rendered from code, not from a run)
    render: Callable[[dict[str, Any]], str]
    measured_by: str  # the command that measures and stores it


BLOCKS = {b.name: b for b in (
    Block("bench", "docs/performance.md", f"{RESULTS}/bench.json", _render_bench,
          ".venv/bin/python scripts/bench.py --write-docs"),
    Block("reliability", "docs/reliability.md", f"{RESULTS}/reliability.json", _render_reliability,
          ".venv/bin/python scripts/confiabilidade.py --write-docs"),
    Block("prova", "docs/prova.md", f"{RESULTS}/prova.json", _render_prova,
          "./scripts/prova.sh, then .venv/bin/python -m scripts.harness.comparar "
          "resultados/resultado-minima.json resultados/resultado-producao.json --write-docs"),
    Block("access-matrix", "docs/access-matrix.md", None, _render_access_matrix,
          ".venv/bin/python -m infra.derived --write"),
)}


def body(block: Block, root: Path = ROOT) -> str:
    data = json.loads((root / block.source).read_text()) if block.source else {}
    return block.render(data).strip("\n")


def fill(text: str, name: str, markdown: str) -> str:
    """``text`` with block ``name`` holding ``markdown`` (exactly one such block)."""
    found = [m for m in _BLOCK.finditer(text) if m["name"] == name]
    if len(found) != 1:
        raise DocBlockError(f"expected one generated:{name} block, found {len(found)}")
    match = found[0]
    return f"{text[:match.start('body')]}{markdown}\n{text[match.end('body'):]}"


def docs(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").rglob("*.md"))]


def unowned(root: Path = ROOT) -> list[str]:
    """Markers not in a registered block's own doc, unpaired markers, registered blocks missing."""
    problems = []
    for path in docs(root):
        if not path.is_file():
            continue
        text = path.read_text()
        relative = path.relative_to(root).as_posix()
        names = [m[2] for m in _MARKER.finditer(text)]
        paired = [m["name"] for m in _BLOCK.finditer(text)]
        if sorted(names) != sorted(paired * 2):
            problems.append(f"{relative}: unpaired or nested generated markers {names}")
        for name in paired:
            if name not in BLOCKS or BLOCKS[name].doc != relative:
                problems.append(f"{relative}: block generated:{name} is not registered for this file")
    for block in BLOCKS.values():
        if not _BLOCK.search((root / block.doc).read_text()):
            problems.append(f"{block.doc}: the generated:{block.name} block is missing")
    return problems


def expected(root: Path = ROOT) -> dict[Path, str]:
    texts: dict[Path, str] = {}
    for block in BLOCKS.values():
        path = root / block.doc
        texts[path] = fill(texts.get(path, path.read_text()), block.name, body(block, root))
    return texts


def stale(root: Path = ROOT) -> list[Path]:
    return [path for path, text in expected(root).items() if path.read_text() != text]


def store(name: str, data: dict[str, Any], root: Path = ROOT) -> list[Path]:
    """A measuring script's run: its result file, then its block rendered from that file."""
    block = BLOCKS[name]
    source = root / block.source
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    doc = root / block.doc
    doc.write_text(fill(doc.read_text(), name, body(block, root)))
    return [source, doc]


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        for path, text in expected().items():
            if path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if argv == ["--check"]:
        problems = unowned() + [f"stale: {p.relative_to(ROOT)} (run: python -m scripts.doc_blocks --write)"
                                for p in stale()]
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    print("usage: python -m scripts.doc_blocks --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

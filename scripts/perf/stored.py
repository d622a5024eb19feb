"""The benchmark's result file: every figure of a run as JSON, and back.

``scripts/bench.py --write-docs`` stores a run in ``docs/results/bench.json`` and
rewrites docs/performance.md's generated block from it; ``scripts/doc_blocks.py``
renders the block again from the stored file (no benchmark runs), so a figure
edited by hand in the doc, or a renderer changed without the doc, is found stale.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from .aws_count import Figures
from .imports import AssetSize, BytecodeRow, ImportRow
from .measure import Measurement
from .sql_trace import SqlCount


def dump(results: list[Measurement], races: dict[str, list[int]], cpu: dict[str, float],
         imports: list[ImportRow], assets: list[AssetSize], bytecode: list[BytecodeRow],
         model: list[str] | None = None) -> dict[str, Any]:
    """A run as plain JSON values (SQL texts left out: the report never shows them)."""
    def measurement(m: Measurement) -> dict[str, Any]:
        data = asdict(m)
        data["aws"]["calls"] = dict(m.aws.calls)
        data["aws"]["by_index"] = dict(m.aws.by_index)
        data["sql"] = {"statements": m.sql.statements, "round_trips": m.sql.round_trips}
        return data

    return {"results": [measurement(m) for m in results], "races": races, "cpu": cpu,
            "imports": [asdict(r) for r in imports], "assets": [asdict(a) for a in assets],
            "bytecode": [asdict(b) for b in bytecode], "model": list(model or [])}


def load(data: dict[str, Any]) -> tuple[list[Measurement], dict[str, list[int]], dict[str, float],
                                        list[ImportRow], list[AssetSize], list[BytecodeRow], list[str]]:
    """The arguments of ``report.render``, from ``dump``'s JSON."""
    results = []
    for m in data["results"]:
        aws = dict(m["aws"], calls=Counter(m["aws"]["calls"]), by_index=Counter(m["aws"]["by_index"]))
        results.append(Measurement(**dict(m, aws=Figures(**aws), sql=SqlCount(**m["sql"]))))
    imports = [ImportRow(**dict(r, bare=tuple(r["bare"]))) for r in data["imports"]]
    return (results, {k: list(v) for k, v in data["races"].items()}, dict(data["cpu"]), imports,
            [AssetSize(**a) for a in data["assets"]], [BytecodeRow(**b) for b in data["bytecode"]],
            list(data.get("model", [])))

"""Score of a mutmut run, per module, from ``mutmut results --all true`` output.

    mutation_score.py RESULTS_FILE [PATTERN ...]

Only mutants whose name matches a pattern (fnmatch, as mutmut's own filter) count.
Killed = caught by a failing test or a timeout; everything else (survived, no tests,
not checked, suspicious) counts against the score and is listed for triage.
"""

from __future__ import annotations

import fnmatch
import sys
from collections import Counter, defaultdict
from pathlib import Path

KILLED = {"killed", "timeout", "caught by type check"}


def parse(text: str) -> dict[str, str]:
    statuses = {}
    for line in text.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            statuses[name] = status
    return statuses


def module_of(mutant: str) -> str:
    return mutant.split(".x", 1)[0] if ".x" in mutant else mutant.rsplit(".", 1)[0]


def main(argv: list[str]) -> int:
    statuses = parse(Path(argv[0]).read_text(encoding="utf-8"))
    patterns = argv[1:] or ["*"]
    chosen = {k: v for k, v in statuses.items() if any(fnmatch.fnmatch(k, p) for p in patterns)}
    by_module: dict[str, Counter] = defaultdict(Counter)
    for name, status in chosen.items():
        by_module[module_of(name)][status] += 1
    print("| module | mutants | killed | survived | other | score |")
    print("|---|---:|---:|---:|---:|---:|")
    total = Counter()
    for module, counts in sorted(by_module.items()):
        total.update(counts)
        print(_row(f"`{module}`", counts))
    print(_row("**all**", total))
    survivors = sorted(k for k, v in chosen.items() if v not in KILLED)
    print(f"\nnot killed ({len(survivors)}):")
    for name in survivors:
        print(f"  {name}: {chosen[name]}")
    return 0


def _row(label: str, counts: Counter) -> str:
    n = sum(counts.values())
    killed = sum(counts[s] for s in KILLED)
    score = f"{100 * killed / n:.1f} %" if n else "—"
    return f"| {label} | {n} | {killed} | {counts['survived']} | {n - killed - counts['survived']} | {score} |"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

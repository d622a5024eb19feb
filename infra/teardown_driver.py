"""The teardown's steps and how they are run: each step acts, then verifies, and
the run stops at the first step that fails; a table shows what was verified."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Check:
    ok: bool
    detail: str


@dataclass
class Step:
    title: str
    plan: list[str]
    run: Callable[[], None]
    verify: Callable[[], Check]
    result: Check | None = field(default=None)


def _table(rows: list[tuple[str, str, str]]) -> str:
    try:
        from io import StringIO

        from rich.console import Console
        from rich.table import Table

        table = Table(title="limpeza: verification")
        for col in ("step", "result", "evidence"):
            table.add_column(col)
        for row in rows:
            table.add_row(*row)
        buffer = StringIO()
        Console(file=buffer, width=140, force_terminal=False).print(table)
        return buffer.getvalue()
    except ImportError:  # plain fallback
        return "\n".join(" | ".join(r) for r in rows) + "\n"


def execute(steps: list[Step], progress: Callable[[str], None]) -> bool:
    rows = []
    ok = True
    for number, step in enumerate(steps, 1):
        progress(f"[{number}/{len(steps)}] {step.title}")
        try:
            step.run()
            step.result = step.verify()
        except Exception as err:  # noqa: BLE001 - reported, and the later steps do not run
            step.result = Check(False, f"{type(err).__name__}: {err}")
        rows.append((f"{number}. {step.title}", "ok" if step.result.ok else "FAILED", step.result.detail))
        progress(f"    -> {'ok' if step.result.ok else 'FAILED'}: {step.result.detail}")
        if not step.result.ok:
            ok = False
            rows += [(f"{n}. {s.title}", "not run", "an earlier step failed")
                     for n, s in enumerate(steps[number:], number + 1)]
            break
    print(_table(rows), end="")
    return ok


def print_plan(steps: list[Step], target: str) -> None:
    print(f"limpeza plan ({target}); nothing is changed without --yes:")
    for number, step in enumerate(steps, 1):
        print(f"  {number}. {step.title}")
        for line in step.plan:
            print(f"       {line}")

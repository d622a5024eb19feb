"""What the local proof scripts share: the running stack, or one line saying how to start
it; and a table of checks whose last column says whether each held."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .local_stack import stack
from .local_stack.stack import StackState

STACK_DOWN = "local stack is down: bash scripts/local-stack up"
STACK_DOWN_EXIT = 2


def running_stack(console: Console) -> StackState | None:
    """The local stack's state, or None after telling the reader how to start it."""
    state = stack.load()
    if state is None:
        console.print(STACK_DOWN)
    return state


def checks_table(title: str, *columns: str) -> Table:
    """A table whose last (unnamed) column is each row's verdict (``verdict``)."""
    table = Table(title=title)
    for column in (*columns, ""):
        table.add_column(column)
    return table


def verdict(ok: bool) -> str:
    return "[green]ok[/]" if ok else "[red]FALHOU[/]"

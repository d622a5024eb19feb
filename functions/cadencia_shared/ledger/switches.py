"""Tool kill switches: one ``interruptor#{tool}`` item per tool an operator has set.

An operator (group ``supervisores``) stops a tool fleet-wide; every orchestrator
instance reads the item before each call of that tool (one strongly consistent
GetItem, no cache) and refuses the call before any invocation
(``orchestrator.switches``). No item: the tool runs. An item whose ``estado`` is
not exactly ``ligada`` stops it — a hand-edited or half-written item fails closed.

The item says who set it (the authorizer's subject and display name), why (a
required, single-line, bounded reason) and when. Each change replaces the item
(the latest word wins); the history of changes is the audit chain's, written by
the operator API that makes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from ..dynamo_types import serialize_item
from .table import ITEM_TYPE_ATTRIBUTE, TABLE_KEY, ItemType, LedgerTable, checked_id

SWITCH_PREFIX = "interruptor#"
REASON_MIN = 3
REASON_MAX = 500
_SINGLE_LINE = re.compile(r"\A[^\x00-\x1f\x7f]+\Z")


class SwitchState(StrEnum):
    STOPPED = "desligada"
    RUNNING = "ligada"


def switch_pk(tool: str) -> str:
    return f"{SWITCH_PREFIX}{checked_id(tool)}"


@dataclass(frozen=True)
class ToolSwitch:
    """One tool's switch as read. ``state`` is STOPPED for any malformed item."""

    tool: str
    state: SwitchState
    subject: str | None = None
    name: str | None = None
    reason: str | None = None
    at: str | None = None

    @property
    def running(self) -> bool:
        return self.state is SwitchState.RUNNING

    def public(self) -> dict[str, Any]:
        """What an operator lists (no personal data of customers: only the operator who set it)."""
        return {"ferramenta": self.tool, "estado": self.state.value, "pessoaSub": self.subject,
                "pessoaNome": self.name, "motivo": self.reason, "alteradoEm": self.at}


def switch_from_item(tool: str, item: dict[str, Any] | None) -> ToolSwitch:
    """Fail closed: absent → running; present → running only with ``estado`` exactly ``ligada``."""
    if item is None:
        return ToolSwitch(tool, SwitchState.RUNNING)
    stored = item.get("estado")
    state = SwitchState.RUNNING if type(stored) is str and stored == SwitchState.RUNNING.value \
        else SwitchState.STOPPED

    def text(name: str) -> str | None:
        value = item.get(name)
        return value if type(value) is str else None

    return ToolSwitch(tool, state, text("pessoaSub"), text("pessoaNome"), text("motivo"), text("alteradoEm"))


def checked_reason(reason: str) -> str:
    """A required reason: stripped, single line, ``REASON_MIN``..``REASON_MAX`` characters."""
    if type(reason) is not str:
        raise ValueError("reason must be text")
    stripped = reason.strip()
    if not REASON_MIN <= len(stripped) <= REASON_MAX or not _SINGLE_LINE.match(stripped):
        raise ValueError("reason must be a single line of 3..500 characters")
    return stripped


class SwitchReader(Protocol):
    def tool_switch(self, tool: str) -> ToolSwitch: ...


class SwitchStore:
    """Read and set the switches over one ledger table."""

    def __init__(self, table: LedgerTable) -> None:
        self.table = table

    def tool_switch(self, tool: str) -> ToolSwitch:
        """One strongly consistent GetItem."""
        return switch_from_item(tool, self.table.get(switch_pk(tool)))

    def tool_switches(self, tools: list[str]) -> list[ToolSwitch]:
        # One GetItem per tool (a handful): the roles hold GetItem by item kind, never BatchGetItem.
        return [self.tool_switch(tool) for tool in tools]

    def set_switch(self, tool: str, state: SwitchState, *, subject: str, name: str, reason: str) -> ToolSwitch:
        """Replace the tool's switch (the latest word wins). The caller checks who may."""
        if not subject or not name:
            raise ValueError("who sets a switch is required")
        switch = ToolSwitch(tool, SwitchState(state), subject, name, checked_reason(reason), self.table.iso())
        item = {TABLE_KEY: switch_pk(tool), ITEM_TYPE_ATTRIBUTE: ItemType.SWITCH.value, "ferramenta": tool,
                "estado": switch.state.value, "pessoaSub": subject, "pessoaNome": name,
                "motivo": switch.reason, "alteradoEm": switch.at}
        self.table.client.put_item(TableName=self.table.name, Item=serialize_item(item))
        return switch

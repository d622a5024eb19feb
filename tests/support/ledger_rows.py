"""A DynamoDB client that enforces one role's row of ``infra/ledger_kinds.py`` on the ledger
table, as IAM's ``dynamodb:LeadingKeys`` statements would in AWS (moto enforces no IAM): every
call the role's code makes is checked against the kinds and actions its row grants, and each
call the row does not grant is recorded (``deny=True``: also refused, AccessDeniedException, as IAM
would, so nothing the row does not grant is written)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from cadencia_shared.ledger import GSI_UNSETTLED
from infra.contract import Ids
from infra.ledger_kinds import KINDS, LEDGER_ACCESS

INDEX_QUERIERS = {Ids.DECISION_ROLE, Ids.RECONCILER_ROLE}  # the unconditioned Query on the sparse index
NEVER_GRANTED = ("scan", "batch_get_item", "batch_write_item", "transact_write_items", "transact_get_items",
                 "delete_item")


class RowEnforcingClient:
    def __init__(self, inner: Any, table: str, role: str, *, deny: bool = False) -> None:
        self._inner, self._table, self.role, self.deny = inner, table, role, deny
        self.violations: list[tuple[str, str, str | None]] = []
        self.calls: list[tuple[str, str | None, str | None]] = []  # (action, kind, key) of each keyed call

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("TableName") == self._table or name.startswith(("batch_", "transact_")):
                before = len(self.violations)
                self._check(name, kwargs)
                if self.deny and len(self.violations) > before:
                    raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not in the row"}},
                                      name)
            return attribute(*args, **kwargs)
        return call

    def _check(self, operation: str, kwargs: dict[str, Any]) -> None:
        action = "dynamodb:" + "".join(part.capitalize() for part in operation.split("_"))
        if operation == "query":
            if not (kwargs.get("IndexName") == GSI_UNSETTLED and self.role in INDEX_QUERIERS):
                self.violations.append((action, kwargs.get("IndexName"), None))
            return
        if operation in NEVER_GRANTED:
            self.violations.append((action, None, None))
            return
        key = (kwargs.get("Key") or kwargs.get("Item") or {}).get("pk", {}).get("S")
        kind = next((prefix for prefix in KINDS if key and key.startswith(prefix)), None)
        self.calls.append((action, kind, key))
        if action not in LEDGER_ACCESS.get(self.role, {}).get(kind or "", ()):
            self.violations.append((action, kind, key))

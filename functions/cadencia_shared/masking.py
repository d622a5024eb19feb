"""Personal data masked for people who do not need it whole (operators' lists,
hand-off events): enough to tell two conversations apart, not to contact anyone.

A conversation id may be the customer's WhatsApp number, so it is masked too;
order ids and amounts are not personal and stay whole (the approver decides on them).
"""

from __future__ import annotations

import re
from typing import Any

# Argument fields shown whole: what an approver must see to decide.
NOT_PERSONAL = frozenset({"pedidoId", "valor"})


def mask_identifier(value: str | int, *, keep: int = 4) -> str:
    text = str(value)
    if len(text) <= keep:
        return "*" * len(text)
    return "*" * min(len(text) - keep, 8) + text[-keep:]


def mask_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if k in NOT_PERSONAL else mask_identifier(v, keep=2)) for k, v in arguments.items()}


# Free text a customer typed may hold contact data: e-mails, phone numbers, CPFs,
# street numbers. Masked by shape (a person reading the history needs the gist, not these).
_FREE_TEXT_PATTERNS = (
    re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+"),
    re.compile(r"\+?\d[\d\s().-]{7,}\d"),
    re.compile(r"\d{3}\.\d{3}\.\d{3}-\d{2}"),
)


def mask_free_text(text: str) -> str:
    for pattern in _FREE_TEXT_PATTERNS:
        text = pattern.sub("[oculto]", text)
    return text

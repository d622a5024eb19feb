"""The scheduled reconciler, when the code has one: one pass, run as its own process."""

from __future__ import annotations

from .fleet import Answer, Fleet
from .world import World


def discover() -> tuple[None, None]:
    """No reconciler Lambda exists in this code yet (issue 8, item 2)."""
    return None, None


__all__ = ["discover", "Answer", "Fleet", "World"]

"""The scheduled reconciler, when the code has one: one pass per call, in its own
process, fed the event an EventBridge schedule sends. Its answer is kept with the
other processes' output (for the leak scan) but is not a customer answer."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import replace

from cadencia_shared import catalog
from cadencia_shared.catalog import ToolSpec

from .fleet import Answer, Fleet
from .world import World

PassRunner = Callable[[Fleet, World], list[Answer]]


def spec() -> ToolSpec | None:
    """The reconciler Lambda as the fleet runs it (None when this code has none)."""
    package = getattr(catalog, "RECONCILER_PACKAGE", None)
    if package is None or importlib.util.find_spec(package) is None:
        return None
    # timeout_s: the reconciler Lambda's (infra/reconciler.py); the fleet runs it in-process.
    # Shaped like the refund's row (its network, ledger and gateway), as itself: never shown to a model.
    return replace(catalog.EMITIR_REEMBOLSO, name=package, description="the refund reconciler (not a tool)",
                   function_name=catalog.RECONCILER_FUNCTION_NAME, db_user=catalog.RECONCILER_DB_USER,
                   package=package, timeout_s=60, irreversible=False, approval=None)


def discover() -> tuple[PassRunner | None, str | None, str | None]:
    """(one pass, its function name, its package) — all None without a reconciler."""
    lambda_spec = spec()
    if lambda_spec is None:
        return None, None, None
    handler = importlib.import_module(f"{lambda_spec.package}.handler")

    def one_pass(fleet: Fleet, world: World) -> list[Answer]:
        answer = fleet.run(lambda_spec, handler.scheduled_event(), label="reconciler pass")
        world.reconciler_passes.append(answer)
        return []  # not a customer answer: judged by the books, not by truth.judge

    return one_pass, lambda_spec.function_name, lambda_spec.package

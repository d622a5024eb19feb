"""Body of one child process: a real OS process running one tool's Lambda handler.

The parent (``fleet.py``) starts it through a multiprocessing *forkserver* that has
already imported the handlers, so 50 children start in well under a second each.
The child redirects its own stdout/stderr (fd 1 and 2: Powertools logs, EMF metrics,
anything a library prints) to a file the parent scans for secrets, runs the handler
exactly as Lambda would (JSON event in, JSON response out) and writes the response
to a file. A *seam* may wrap one adapter method so that the process SIGKILLs itself
at that point: a real death, not a raised exception, with no ``finally`` blocks, no
rollback sent by the client, no response. Production code is not edited: the seam
wraps the class attribute inside this process only.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any

SEAM_REACHED = "seam-reached"


def _die(marker: Path) -> None:
    marker.write_text(SEAM_REACHED)
    os.kill(os.getpid(), signal.SIGKILL)


def _wrap(owner: type, name: str, *, marker: Path, when: str,
          condition: Callable[[tuple, dict], bool] = lambda args, kwargs: True,
          kill: bool = True) -> None:
    """Replace ``owner.name`` so that this process marks (and dies) before or after it."""
    original = getattr(owner, name)

    @wraps(original)
    def seam(*args: Any, **kwargs: Any) -> Any:
        fire = condition(args, kwargs)
        if fire and when == "before":
            if kill:
                _die(marker)
            marker.write_text(SEAM_REACHED)  # the parent kills us while the call is held
        try:
            result = original(*args, **kwargs)
        except BaseException:
            if fire and when == "after-any":
                _die(marker)
            raise
        if fire and when in ("after", "after-any"):
            _die(marker)
        return result

    setattr(owner, name, seam)


def _settled_as_executed(args: tuple, kwargs: dict) -> bool:
    from cadencia_shared.ledger import ClaimStatus

    status = args[2] if len(args) > 2 else kwargs.get("status")
    return status is ClaimStatus.EXECUTED


def _die_after_release_or_before_answering(marker: Path) -> None:
    """The retry of the in-flight race dies where it hurts most: right after a
    transaction that released reserved money COMMITs (before it can reserve again);
    if it never releases anything, just before it would answer."""
    from emitir_reembolso.logic import RefundService
    from emitir_reembolso.repository import RefundOrders

    released: list[bool] = []
    release, transaction, issue = RefundOrders.release, RefundOrders.transaction, RefundService.issue

    def release_and_remember(self: Any, *args: Any, **kwargs: Any) -> Any:
        released.append(True)
        return release(self, *args, **kwargs)

    @contextmanager
    def transaction_then_die(self: Any) -> Iterator[None]:
        with transaction(self):
            yield
        if released:  # the release is committed now
            _die(marker)

    def issue_then_die(self: Any, *args: Any, **kwargs: Any) -> Any:
        issue(self, *args, **kwargs)
        _die(marker)

    RefundOrders.release = release_and_remember  # type: ignore[method-assign]
    RefundOrders.transaction = transaction_then_die  # type: ignore[method-assign,assignment]
    RefundService.issue = issue_then_die  # type: ignore[method-assign]


def install_seam(point: str | None, marker: Path) -> None:
    """The crash points of the refund path (names are the figures' row labels)."""
    if point is None:
        return
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    from cadencia_shared.ledger import Ledger
    from emitir_reembolso.gateway import PaymentGatewayClient

    if point == "after_claim":  # the conditional PutItem (or a retake) succeeded
        _wrap(Ledger, "claim_refund", marker=marker, when="after")
        _wrap(Ledger, "retake_claim", marker=marker, when="after")
    elif point == "after_secret":  # the gateway secret was read
        _wrap(SecretsProvider, "get", marker=marker, when="after")
    elif point == "during_gateway":  # the POST is held at the gateway; the parent kills us
        _wrap(PaymentGatewayClient, "refund", marker=marker, when="before", kill=False)
    elif point == "after_debit":  # the gateway answered the debit; nothing recorded yet
        _wrap(PaymentGatewayClient, "refund", marker=marker, when="after")
    elif point == "after_erp":  # the ERP transaction committed; the claim still says a send may have left
        _wrap(Ledger, "settle_claim", marker=marker, when="before", condition=_settled_as_executed)
    elif point == "after_settle":  # the ledger says executed, ERP agreeing; nothing answered yet
        _wrap(Ledger, "settle_claim", marker=marker, when="after", condition=_settled_as_executed)
    elif point == "retry_dies":
        _die_after_release_or_before_answering(marker)
    else:
        raise ValueError(f"unknown crash point {point!r}")


def _redirect_output(log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # Every logger at DEBUG (the SDK caps in cadencia_shared.observability still apply):
    # the leak scan reads the most verbose output an operator could switch on.
    logging.basicConfig(level=logging.DEBUG, force=True)


def run(spec: dict[str, Any]) -> None:
    """Entry point inside the child process (``spec`` is plain JSON data)."""
    _redirect_output(spec["log"])
    os.environ.update(spec["env"])
    install_seam(spec.get("kill_at"), Path(spec["marker"]))
    from orchestrator.invokers.local import LocalContext

    handler = importlib.import_module(f"{spec['package']}.handler").lambda_handler
    event = json.loads(json.dumps(spec["event"]))
    try:
        response: Any = handler(event, LocalContext(spec["function_name"], timeout_s=30))
    except Exception as err:  # a crash Lambda would report as FunctionError
        response = {"crash": type(err).__name__}
    result = Path(spec["result"])
    tmp = result.with_suffix(".tmp")
    tmp.write_text(json.dumps(response, ensure_ascii=False, default=str))
    tmp.rename(result)

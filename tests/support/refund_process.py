"""Run the refund Lambda's handler in a process of its own (a separate execution
environment), so tests can race it against others and SIGKILL it mid-way.

    python -m tests.support.refund_process '<event json>'

The environment is the function's (see ``StackState.function_environment``);
the answer is printed as one JSON line. With ``REFUND_PROCESS_DIE_AT`` set, the
process SIGKILLs itself at that crash point (a real death: no ``finally``, no
rollback sent, no answer):

- ``after_release_ledger``: the ledger has recorded a releasing transition
  (declined, or failed before the gateway) and the ERP transaction that frees the
  reservation has not committed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from functools import wraps
from typing import Any

from emitir_reembolso.handler import lambda_handler
from orchestrator.invokers.local import LocalContext

DIE_AT = "REFUND_PROCESS_DIE_AT"


def _die_after_release_ledger() -> None:
    from cadencia_shared.ledger import SETTLED_CLAIM_STATUSES, Ledger

    settle = Ledger.settle_claim

    @wraps(settle)
    def settle_then_die(self: Any, claim: Any, status: Any, **kwargs: Any) -> Any:
        result = settle(self, claim, status, **kwargs)
        if status in SETTLED_CLAIM_STATUSES:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    Ledger.settle_claim = settle_then_die  # type: ignore[method-assign]


def _die_before_executed_ledger() -> None:
    """SIGKILL after the ERP's COMMIT of an executed refund, before the claim's final write."""
    from cadencia_shared.ledger import ClaimStatus, Ledger

    settle = Ledger.settle_claim

    @wraps(settle)
    def die_before_executed(self: Any, claim: Any, status: Any, **kwargs: Any) -> Any:
        if status is ClaimStatus.EXECUTED:
            os.kill(os.getpid(), signal.SIGKILL)
        return settle(self, claim, status, **kwargs)

    Ledger.settle_claim = die_before_executed  # type: ignore[method-assign]


def main() -> None:
    point = os.environ.get(DIE_AT)
    if point == "after_release_ledger":
        _die_after_release_ledger()
    elif point == "before_executed_ledger":
        _die_before_executed_ledger()
    elif point:
        raise SystemExit(f"unknown crash point {point!r}")
    event = json.loads(sys.argv[1])
    print(json.dumps(lambda_handler(event, LocalContext("cadencia-emitir-reembolso"))), flush=True)


if __name__ == "__main__":
    main()

"""Run the refund Lambda's handler in a process of its own (a separate execution
environment), so tests can race it against others and SIGKILL it mid-way.

    python -m tests.support.refund_process '<event json>'

The environment is the function's (see ``StackState.function_environment``);
the answer is printed as one JSON line.
"""

from __future__ import annotations

import json
import sys

from emitir_reembolso.handler import lambda_handler
from orchestrator.invokers.local import LocalContext


def main() -> None:
    event = json.loads(sys.argv[1])
    print(json.dumps(lambda_handler(event, LocalContext("cadencia-emitir-reembolso"))), flush=True)


if __name__ == "__main__":
    main()

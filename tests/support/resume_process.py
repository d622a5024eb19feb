"""Resume a decided approval in a process of its own (the orchestrator's execution
environment), so tests can race two of them and SIGKILL one mid-way.

    python -m tests.support.resume_process <aprovacaoId> [--kill-before-refund | --kill-after-refund]
                                           [--clock-offset-s N]

Runs against the local stack named by CADENCIA_LOCAL_STACK_DIR; prints the result as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time

from cadencia_shared.ledger import Ledger
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.loop import ConversationBusyError
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from orchestrator.settings import OrchestratorSettings
from scripts.local_stack import stack
from scripts.local_stack.aws import session_client


class KillingInvoker:
    """SIGKILLs its own process around the refund's invocation (no exception, no cleanup)."""

    def __init__(self, inner: InProcessInvoker, when: str | None) -> None:
        self.inner, self.when = inner, when

    def invoke(self, tool, event):
        if tool.name == "emitir_reembolso" and self.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        answer = self.inner.invoke(tool, event)
        if tool.name == "emitir_reembolso" and self.when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return answer


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("approval")
    p.add_argument("--kill-before-refund", action="store_const", const="before", dest="kill")
    p.add_argument("--kill-after-refund", action="store_const", const="after", dest="kill")
    p.add_argument("--clock-offset-s", type=float, default=0.0)
    args = p.parse_args()
    state = stack.load()
    assert state is not None
    settings = OrchestratorSettings.from_env({**os.environ, "TOOL_INVOKER": "local",
                                              "LEDGER_TABLE": state.ledger_table})
    ledger = Ledger(state.ledger_table, session_client("dynamodb", state.aws_endpoint),
                    clock=lambda: time.time() + args.clock_offset_s)
    invoker = KillingInvoker(InProcessInvoker(state.function_environments()), args.kill)
    try:
        done = Resumer.build(settings, ledger, invoker).resume(args.approval, Deadline.after(60))
        print(json.dumps(done.to_wire(), ensure_ascii=False), flush=True)
    except ConversationBusyError:
        print(json.dumps({"motivo": "conversa_ocupada"}), flush=True)


if __name__ == "__main__":
    main()

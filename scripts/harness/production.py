"""Lab 87's Figure 2: the real orchestrator and the real tool Lambdas.

Each customer message goes through ``orchestrator.handler.lambda_handler`` — the
same entry point, settings, SDK, gates and ledger as in AWS — configured by
environment exactly as the CDK stack configures it, except that the tools are
reached through the in-process invoker (each with its own environment and DB
user) and AWS is the local stack. The attempt records are read back from the
ledger, never reconstructed by the harness.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from cadencia_shared.catalog import HANDOFF_BUS_NAME
from cadencia_shared.audit_chain import AUDIT_TABLE
from cadencia_shared.ledger import Ledger
from orchestrator import handler
from orchestrator.invokers.local import LocalContext, function_environment

from .records import record


def orchestrator_environment(state: Any, *, model_env: dict[str, str], tool_envs_file: Path) -> dict[str, str]:
    return {
        **state.aws_environment(),
        **model_env,
        "LEDGER_TABLE": state.ledger_table,
        "AUDIT_TABLE": AUDIT_TABLE,
        "TOOL_INVOKER": "local",
        "LOCAL_TOOL_ENVIRONMENTS": str(tool_envs_file),
        "EVENT_BUS_NAME": HANDOFF_BUS_NAME,  # hand-offs reach the local bus and its queue
        # The turns' spans, one JSON line each (orchestrator.tracing; docs/model-cost.md).
        "TRACE_MODE": "jsonl", "TRACE_FILE": str(Path(state.directory) / "traces.jsonl"),
    }


class ProductionRunner:
    def __init__(self, state: Any, ledger: Ledger, model_env: dict[str, str], log_level: str = "WARNING",
                 tool_env_overrides: dict[str, dict[str, str | None]] | None = None) -> None:
        """``tool_env_overrides``: per tool, variables to set (or, with None, to remove)
        in its environment — how a failure is injected (a broken deploy)."""
        self.state = state
        self.ledger = ledger
        self._tmp = tempfile.TemporaryDirectory(prefix="cadencia-prova-")
        envs_file = Path(self._tmp.name) / "tool-environments.json"
        tool_envs = {name: {**env, "POWERTOOLS_LOG_LEVEL": log_level}
                     for name, env in state.function_environments().items()}
        for name, changes in (tool_env_overrides or {}).items():
            for key, value in changes.items():
                if value is None:
                    tool_envs[name].pop(key, None)
                else:
                    tool_envs[name][key] = value
        envs_file.write_text(json.dumps(tool_envs))
        self.env = {**orchestrator_environment(state, model_env=model_env, tool_envs_file=envs_file),
                    "POWERTOOLS_LOG_LEVEL": log_level}
        handler.reset()

    def turn(self, conversation_id: str, customer_id: int, index: int, text: str) -> dict[str, Any]:
        event = {"conversaId": conversation_id, "clienteId": customer_id,
                 "mensagemId": f"{conversation_id}.m{index + 1}",
                 "mensagem": text}
        with function_environment(self.env):
            return handler.lambda_handler(event, LocalContext("cadencia-orquestrador", timeout_s=90))

    def records(self, conversation_id: str) -> list[dict[str, Any]]:
        out = []
        for item in self.ledger.attempts(conversation_id):
            out.append(record(
                evento=item["evento"], timestamp=item["timestamp"], arquitetura="producao",
                conversaId=item["conversaId"], pedidoId=item.get("pedidoId"), ferramenta=item["ferramenta"],
                tentativaNumero=int(item["tentativaNumero"]), resultado=item["resultado"],
                chaveIdempotencia=item.get("chaveIdempotencia"), detalhe=item.get("detalhe"),
            ))
        return out

    def close(self) -> None:
        handler.reset()
        self._tmp.cleanup()

"""A real model that cannot answer stops the run, with its cause.

The orchestrator turns a model failure into the customer's apology, as it must in production; a harness
that only counted the turns would print a table of zeros and exit 0. So before a run against a real
model one small call is made with the same configuration (the cause: the SDK's error class and
message), and a turn that still ends with ``modelo_indisponivel`` ends the run (the cause: the class the
orchestrator wrote in the conversation's audit record ``FALHA_DO_MODELO``).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

MODEL_FAILED = "modelo_indisponivel"  # the orchestrator's ``motivo`` for a turn the model could not answer
CHECK_TIMEOUT_S = 30.0


class ModelFailure(Exception):
    """The model could not answer; the message names the cause."""


def sdk_for(env: dict[str, str], **options: Any) -> Any:
    if env["MODEL_PROVIDER"] == "bedrock":
        return anthropic.AnthropicBedrock(**options)
    return anthropic.Anthropic(api_key=env.get("ANTHROPIC_API_KEY"), base_url=env.get("ANTHROPIC_BASE_URL"),
                               **options)


def check_model(env: dict[str, str]) -> None:
    """One call of one output token; raises ModelFailure with the SDK's error class and message."""
    try:
        sdk = sdk_for(env, max_retries=0, timeout=CHECK_TIMEOUT_S)
        sdk.messages.create(model=env["MODEL_ID"], max_tokens=1, messages=[{"role": "user", "content": "oi"}])
    except Exception as err:  # noqa: BLE001 - any failure here (SDK, credentials, region) is the cause to show
        raise ModelFailure(f"{type(err).__name__}: {str(err)[:400]}") from None


def failure_in_turn(audit: Any, conversation_id: str, index: int) -> ModelFailure:
    """The failure of a turn that ended with ``modelo_indisponivel``, named from its audit record."""
    causes = [json.loads(r["detalhes"]) for r in audit.records(conversation_id) if r.get("evento") == "FALHA_DO_MODELO"]
    last = causes[-1] if causes else {}
    return ModelFailure(f"{last.get('erro') or 'unknown error'} (classe {last.get('classe', '?')}, "
                        f"{last.get('tentativas', '?')} attempt(s)) in message {index + 1} of {conversation_id}")

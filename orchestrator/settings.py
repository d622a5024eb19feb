"""Orchestrator configuration (environment variables set by the CDK stack)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, Json, model_validator

from cadencia_shared.aws import AwsSettings
from cadencia_shared.catalog import TOOLS
from cadencia_shared.settings import ApprovalSettings, EnvSettings, LedgerSettings


class ModelProvider(StrEnum):
    ANTHROPIC = "anthropic"  # Messages API; key from Secrets Manager (or ANTHROPIC_API_KEY locally)
    BEDROCK = "bedrock"  # AnthropicBedrock; IAM credentials of the function, no key


class OrchestratorSettings(EnvSettings):
    provider: ModelProvider = Field(ModelProvider.ANTHROPIC, alias="MODEL_PROVIDER")
    model_id: str = Field("claude-sonnet-5-5", alias="MODEL_ID")
    api_key_secret_name: str | None = Field(None, alias="ANTHROPIC_API_KEY_SECRET_NAME")
    # Only for the local scripted model server (the harness); unset in AWS.
    base_url: str | None = Field(None, alias="ANTHROPIC_BASE_URL")
    max_tokens: int = Field(1024, alias="MODEL_MAX_TOKENS", ge=64, le=8192)
    # Per model call, before the deadline cap; the SDK's own retries are off.
    model_timeout_s: float = Field(25.0, alias="MODEL_TIMEOUT_S", gt=0)
    model_max_attempts: int = Field(3, alias="MODEL_MAX_ATTEMPTS", ge=1, le=5)
    model_backoff_cap_s: float = Field(4.0, alias="MODEL_BACKOFF_CAP_S", ge=0)
    # The retry ceiling per (conversaId, pedidoId, ferramenta). Lab 87: 4.
    ceiling: int = Field(4, alias="TETO_TENTATIVAS", ge=1, le=50)
    # Circuit breaker per tool, shared by every instance: opens after this many
    # consecutive failures (crash, timeout, throttle; not a typed refusal)...
    breaker_failures: int = Field(5, alias="DISJUNTOR_FALHAS", ge=1, le=100)
    # ... and lets one probe through this long after opening.
    breaker_cooldown_s: float = Field(30.0, alias="DISJUNTOR_ESPERA_S", gt=0, le=3600)
    # How long an execution environment trusts a CLOSED circuit it read (0: read before
    # every call). For that long after another environment opened it, this one may still
    # call the tool — one failing call at most (orchestrator/circuit_store.py, StateCache).
    breaker_cache_s: float = Field(2.0, alias="DISJUNTOR_CACHE_S", ge=0, le=30)
    # Model rounds a single customer message may take before a human takes over.
    # (This is the turn's model-call budget: one model request per round.)
    max_rounds: int = Field(8, alias="MAX_RODADAS_POR_TURNO", ge=1, le=50)
    # Tool calls one customer message may trigger, all tools together.
    max_tool_calls: int = Field(12, alias="MAX_FERRAMENTAS_POR_TURNO", ge=1, le=200)
    # Tokens one customer message may spend, from each response's ``usage``
    # (input, cached input and output); checked before each model call.
    max_turn_tokens: int = Field(200_000, alias="MAX_TOKENS_POR_TURNO", ge=1_000)
    # Model dollars one conversation may spend, all turns together, at the prices below;
    # checked like the tokens: before each model call and each tool call (orchestrator.usage).
    max_conversation_cost_usd: float = Field(2.0, alias="ORCAMENTO_CUSTO_USD_POR_CONVERSA", gt=0, le=1000)
    # List prices of MODEL_ID, USD per million tokens (defaults: Claude Sonnet 4.5, read 2026-12-05).
    input_price_usd_mtok: float = Field(3.0, alias="MODEL_PRECO_ENTRADA_USD_MTOK", ge=0)
    output_price_usd_mtok: float = Field(15.0, alias="MODEL_PRECO_SAIDA_USD_MTOK", ge=0)
    # Longer than the Lambda timeout, so a live invocation never loses its lease.
    conversation_lease_s: int = Field(120, alias="CONVERSA_LEASE_S", ge=5)
    # Seconds kept in reserve at the end of a turn to commit state and answer.
    reserve_s: float = Field(3.0, alias="RESERVA_FINAL_S", ge=0)
    history_max_messages: int = Field(80, alias="HISTORICO_MAX_MENSAGENS", ge=4)
    # Past the cap the oldest turns are cut down to this many messages at once (unset: half
    # the cap), so the cached prefix survives until the next cut (history.trim_in_steps).
    history_after_cut: int | None = Field(None, alias="HISTORICO_APOS_CORTE", ge=2)
    # Prompt caching (orchestrator.prompt_cache): the tools + system prefix's TTL (unset: 1h
    # on the Anthropic API, 5m on Bedrock, where 1h is only for the models AWS lists) and the
    # conversation's; "off" sends no cache_control. docs/model-cost.md: why these defaults.
    prompt_cache_prefix_ttl_set: Literal["5m", "1h", "off"] | None = Field(None, alias="PROMPT_CACHE_PREFIX_TTL")
    prompt_cache_ttl: Literal["5m", "1h", "off"] = Field("5m", alias="PROMPT_CACHE_TTL")
    tool_invoker: Literal["aws", "local"] = Field("aws", alias="TOOL_INVOKER")
    tool_functions: Json[dict[str, str]] = Field(
        default_factory=lambda: {name: spec.function_name for name, spec in TOOLS.items()}, alias="TOOL_FUNCTIONS"
    )
    strict_tools: bool = Field(True, alias="STRICT_TOOLS")
    # Final answers checked per turn by the output contract before its fallback text.
    output_contract_attempts: int = Field(3, alias="CONTRATO_SAIDA_TENTATIVAS", ge=1, le=10)
    # The stack's EventBridge bus for hand-offs and approval requests (orchestrator/handoffs.py).
    event_bus: str | None = Field(None, alias="EVENT_BUS_NAME")
    # The hash-chained audit table (cadencia_shared.audit_chain); unset: audit
    # records stay ``auditoria#`` items of the ledger (tests that read them there).
    audit_table: str | None = Field(None, alias="AUDIT_TABLE")
    ledger: LedgerSettings = Field(default_factory=LedgerSettings)
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    aws: AwsSettings = Field(default_factory=AwsSettings)

    @property
    def prompt_cache_prefix_ttl(self) -> Literal["5m", "1h", "off"]:
        if self.prompt_cache_prefix_ttl_set is not None:
            return self.prompt_cache_prefix_ttl_set
        return "5m" if self.provider is ModelProvider.BEDROCK else "1h"

    @property
    def history_cut_to(self) -> int:
        return self.history_after_cut or max(2, self.history_max_messages // 2)

    @model_validator(mode="after")
    def _coherent(self) -> OrchestratorSettings:
        if self.history_cut_to >= self.history_max_messages:
            raise ValueError("HISTORICO_APOS_CORTE must be below HISTORICO_MAX_MENSAGENS")
        if self.prompt_cache_prefix_ttl == "5m" and self.prompt_cache_ttl == "1h":
            raise ValueError("PROMPT_CACHE_TTL=1h needs PROMPT_CACHE_PREFIX_TTL=1h (a 1h breakpoint "
                             "cannot follow a 5m one)")
        return self

    @classmethod
    def from_env(cls, environ=None):  # type: ignore[override]
        base = super().from_env(environ)
        return base.model_copy(update={"ledger": LedgerSettings.from_env(environ), "aws": AwsSettings.from_env(environ),
                                       "approval": ApprovalSettings.from_env(environ)})

"""Powertools Logger and Metrics, wired the same way in every Lambda.

Metrics are EMF lines on stdout (CloudWatch turns them into metrics; the local
stack counts them). Every metric is emitted with ``single_metric`` so that each
carries exactly its own dimension set: the orchestrator emits for several tools
in one invocation, and Powertools' shared ``Metrics`` object keeps one set.
No service dimension is added (``POWERTOOLS_SERVICE_NAME`` is not set for
metrics), so ``InterrupcoesPorTeto{Ferramenta}`` is exactly what alarms match.
"""

from __future__ import annotations

import logging

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit, single_metric

# SDKs print what they send and receive at DEBUG:
# - botocore: whole response bodies (GetSecretValue's SecretString included) and the
#   signed canonical request (with the session token);
# - anthropic: every request's options, i.e. the whole conversation (customers'
#   e-mails, phones, addresses); its HTTP stack (httpx2/httpcore2 for anthropic 2.x;
#   httpx/httpcore for 0.x-1.x) logs headers and bodies too.
# Raising an application's log level to DEBUG (or Lambda's root logger, or
# ANTHROPIC_LOG=debug) must never print a secret or personal data, so these loggers
# are capped at INFO here, in the module every Lambda imports. INFO keeps what is
# useful: "HTTP Request: POST … 200 OK" lines and the SDKs' retry notices.
SDK_LOGGERS = ("botocore", "boto3", "s3transfer", "anthropic", "httpx2", "httpcore2", "httpx", "httpcore")


def cap_sdk_loggers() -> None:
    """Cap the SDK loggers at INFO (again: importing anthropic with
    ``ANTHROPIC_LOG=debug`` lowers its loggers, so its importer calls this after)."""
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)


cap_sdk_loggers()

NAMESPACE = "Cadencia/AgenteAtendimento"
TOOL_DIMENSION = "Ferramenta"


class Metric:
    """Metric names (Lab 87's external names; Portuguese by convention)."""

    CEILING_INTERRUPTIONS = "InterrupcoesPorTeto"
    CALLS_ALLOWED = "ChamadasPermitidas"
    IDEMPOTENCY_BLOCKS = "BloqueiosPorIdempotencia"
    REAL_REFUNDS = "ReembolsosReais"
    UNKNOWN_OUTCOMES = "ResultadosDesconhecidos"
    TOOL_REFUSALS = "RecusasDaFerramenta"
    TOOL_ERRORS = "ErrosDeFerramenta"
    SEAL_REFUSALS = "ChamadasSeladasRecusadas"  # {Ferramenta, Codigo}: a call refused at the tool's edge (SEAL)
    MODEL_ERRORS = "ErrosDoModelo"
    HUMAN_HANDOFFS = "EncaminhamentosHumanos"
    BREAKER_TRANSITIONS = "TransicoesDoDisjuntor"  # {Ferramenta, Estado}: a circuit changed state
    BREAKER_REFUSALS = "RecusasPorDisjuntor"  # {Ferramenta}: a call refused while the circuit was open
    SWITCH_REFUSALS = "RecusasPorInterruptor"  # {Ferramenta}: a call refused while an operator stopped its tool
    OUTPUT_CONTRACT = "ContratoDeSaida"  # {Resultado}: a final answer refused (violacao), a fallback sent
    TURN_LIMITS = "TurnosInterrompidos"  # {Motivo}: a budget, the deadline or a cancellation ended the turn
    RECONCILIATIONS = "ConciliacoesDeReembolso"  # {Resultado}: one per claim the reconciler visited
    OLDEST_UNSETTLED_AGE = "IdadeDoReembolsoPendenteMaisAntigo"  # seconds, after each reconciler pass
    # a claim not re-sent because the gateway may have forgotten its key: a person settles it
    PAST_IDEMPOTENCY_WINDOW = "ReembolsosForaDaJanelaDeIdempotencia"
    BOOKS_DIVERGENCES = "DivergenciasNosLivros"  # {Divergencia}: one per disagreement the books' audit found
    BOOKS_OPEN_DIVERGENCES = "DivergenciasNosLivrosAbertas"  # after each audit: those left unrepaired (0 too)


OUTCOME_DIMENSION = "Resultado"


def count(name: str, dimensions: dict[str, str], value: float = 1) -> None:
    """Emit one EMF metric with exactly ``dimensions``."""
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE) as metric:
        for key, dim_value in dimensions.items():
            metric.add_dimension(name=key, value=dim_value)


def seconds(name: str, value: float) -> None:
    """Emit one EMF gauge in seconds, without dimensions (the reconciler's age alarm)."""
    with single_metric(name=name, unit=MetricUnit.Seconds, value=value, namespace=NAMESPACE):
        pass


def count_for_tool(name: str, tool: str, value: float = 1) -> None:
    count(name, {TOOL_DIMENSION: tool}, value)


def logger_for(service: str) -> Logger:
    # Secrets never reach the logger: handlers log ids and outcomes, never events.
    return Logger(service=service)

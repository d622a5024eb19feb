"""Deployment options, read from CDK context (``-c key=value`` or cdk.json).

Every option has a default that synthesizes offline; docs/infrastructure.md
lists them. Parsing is strict: a misspelt value fails the synth instead of
silently deploying something else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.settings import OrchestratorSettings

PROVIDERS = ("anthropic", "bedrock")
DATABASE_MODES = ("demo", "imported")
TEARDOWN_PHASES = ("", "functions", "database-users")

# The Anthropic API default is the orchestrator's own default (one source). Bedrock
# has no default: its ids differ per account and region (often a cross-region
# inference profile such as "us.anthropic.<model>-v1:0", which Bedrock routes to
# one of the profile's regions, so the role must allow the model in each of
# them) — the deployer passes the id the Bedrock console shows: -c modelId=...
DEFAULT_MODEL_IDS = {"anthropic": OrchestratorSettings.model_fields["model_id"].default}
DEFAULT_BEDROCK_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
INFERENCE_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "ca.", "jp.", "au.", "global.")

ANTHROPIC_KEY_SECRET_NAME = "cadencia/anthropic-api-key"
DEFAULT_GATEWAY_URL = "https://gateway-pagamento.example.invalid"


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ImportedDatabase:
    """An existing ERP cluster (Lab 87 looked it up as a Terraform data source)."""

    cluster_identifier: str
    cluster_resource_id: str  # cluster-XXXXXXXX: what rds-db:connect ARNs name
    endpoint: str
    port: int
    security_group_id: str
    vpc_id: str
    availability_zones: tuple[str, ...]
    private_subnet_ids: tuple[str, ...]  # with a route to a NAT (the refund reaches the gateway)
    manage_ingress: bool = True  # add 5432 ingress from the tool Lambdas to the cluster's SG


@dataclass(frozen=True)
class StackConfig:
    model_provider: str = "anthropic"
    model_id: str = DEFAULT_MODEL_IDS["anthropic"]
    bedrock_regions: tuple[str, ...] = DEFAULT_BEDROCK_REGIONS
    database: str = "demo"
    imported: ImportedDatabase | None = None
    db_min_capacity: float = 0.0  # 0 = auto-pause when idle (Aurora PostgreSQL 17 supports it)
    db_max_capacity: float = 2.0
    seed_demo_data: bool = False
    gateway_url: str = DEFAULT_GATEWAY_URL
    alarm_email: str | None = None
    reserved_concurrency: bool = True
    ledger_deletion_protection: bool = True
    teardown: str = ""
    # The tools verify the database server with the RDS CA bundle (verify-full);
    # without the bundle the build fails unless this explicit opt-out is given.
    allow_unverified_db_tls: bool = False
    tool_concurrency: Mapping[str, int] = field(default_factory=lambda: {
        # Refunds are irreversible: 5 concurrent at most caps what a runaway
        # loop could do per second, and keeps DB connections bounded.
        "emitir_reembolso": 5,
        "consultar_status_pedido": 10,
        "atualizar_cadastro": 5,
    })
    orchestrator_concurrency: int = 20  # bounds model spend and ledger load
    # Refund reconciler (infra/reconciler.py): how often a pass runs, and after how
    # long a refund still unsettled with the gateway raises the alarm.
    reconciler_rate_minutes: int = 5
    unsettled_refund_alarm_minutes: int = 30

    @property
    def uses_bedrock(self) -> bool:
        return self.model_provider == "bedrock"

    @property
    def demo_database(self) -> bool:
        return self.database == "demo"

    @property
    def model_is_inference_profile(self) -> bool:
        return self.model_id.startswith(INFERENCE_PROFILE_PREFIXES)

    @property
    def foundation_model_id(self) -> str:
        if self.model_is_inference_profile:
            return self.model_id.split(".", 1)[1]
        return self.model_id

    @property
    def deploy_functions(self) -> bool:
        return self.teardown == ""

    @property
    def deploy_database_users(self) -> bool:
        return self.teardown in ("", "functions")


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"context {key}={value!r}: expected true or false")


def _list(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


def from_context(get: Callable[[str], Any]) -> StackConfig:
    """Build the config from ``node.try_get_context``-like lookups."""

    def opt(key: str, default: Any = None) -> Any:
        value = get(key)
        return default if value is None or value == "" else value

    provider = str(opt("modelProvider", "anthropic"))
    if provider not in PROVIDERS:
        raise ConfigError(f"context modelProvider={provider!r}: expected one of {PROVIDERS}")
    database = str(opt("database", "demo"))
    if database not in DATABASE_MODES:
        raise ConfigError(f"context database={database!r}: expected one of {DATABASE_MODES}")
    teardown = str(opt("teardown", ""))
    if teardown not in TEARDOWN_PHASES:
        raise ConfigError(f"context teardown={teardown!r}: expected one of {TEARDOWN_PHASES[1:]}")

    imported = None
    if database == "imported":
        missing = [k for k in ("dbClusterIdentifier", "dbClusterResourceId", "dbEndpoint", "dbSecurityGroupId",
                               "vpcId", "availabilityZones", "privateSubnetIds") if opt(k) is None]
        if missing:
            raise ConfigError(f"database=imported needs context values: {', '.join(missing)}")
        imported = ImportedDatabase(
            cluster_identifier=str(opt("dbClusterIdentifier")),
            cluster_resource_id=str(opt("dbClusterResourceId")),
            endpoint=str(opt("dbEndpoint")),
            port=int(opt("dbPort", 5432)),
            security_group_id=str(opt("dbSecurityGroupId")),
            vpc_id=str(opt("vpcId")),
            availability_zones=_list(opt("availabilityZones")),
            private_subnet_ids=_list(opt("privateSubnetIds")),
            manage_ingress=_bool(opt("manageDbIngress", True), "manageDbIngress"),
        )
        if not imported.cluster_resource_id.startswith("cluster-"):
            raise ConfigError("dbClusterResourceId is the cluster's resource id (cluster-XXXX), not its name")
        if len(imported.availability_zones) != len(imported.private_subnet_ids):
            raise ConfigError("availabilityZones and privateSubnetIds must list one AZ per subnet")

    concurrency = dict(StackConfig().tool_concurrency)
    override = opt("toolConcurrency")
    if override is not None:
        values = json.loads(override) if isinstance(override, str) else dict(override)
        unknown = set(values) - set(concurrency)
        if unknown:
            raise ConfigError(f"toolConcurrency names unknown tools: {sorted(unknown)}")
        concurrency.update({k: int(v) for k, v in values.items()})

    min_acu = float(opt("dbMinCapacity", 0))
    max_acu = float(opt("dbMaxCapacity", 2))
    if not (0 <= min_acu <= max_acu <= 256) or max_acu < 1:
        raise ConfigError("dbMinCapacity/dbMaxCapacity: 0 <= min <= max, max >= 1 ACU")

    model_id = opt("modelId", DEFAULT_MODEL_IDS.get(provider))
    if model_id is None:
        raise ConfigError(
            "context modelProvider=bedrock needs -c modelId=<the Bedrock model or inference-profile id "
            "your account offers, e.g. us.anthropic.<model>-v1:0>"
        )
    return StackConfig(
        model_provider=provider,
        model_id=str(model_id),
        bedrock_regions=_list(opt("bedrockRegions", ",".join(DEFAULT_BEDROCK_REGIONS))),
        database=database,
        imported=imported,
        db_min_capacity=min_acu,
        db_max_capacity=max_acu,
        seed_demo_data=_bool(opt("seedDemoData", False), "seedDemoData"),
        gateway_url=str(opt("gatewayUrl", DEFAULT_GATEWAY_URL)),
        alarm_email=opt("alarmEmail"),
        reserved_concurrency=_bool(opt("reservedConcurrency", True), "reservedConcurrency"),
        ledger_deletion_protection=_bool(opt("ledgerDeletionProtection", True), "ledgerDeletionProtection"),
        teardown=teardown,
        allow_unverified_db_tls=_bool(opt("allowUnverifiedDbTls", False), "allowUnverifiedDbTls"),
        tool_concurrency=concurrency,
        orchestrator_concurrency=int(opt("orchestratorConcurrency", 20)),
        reconciler_rate_minutes=_positive(opt("reconcilerRateMinutes", 5), "reconcilerRateMinutes"),
        unsettled_refund_alarm_minutes=_positive(opt("unsettledRefundAlarmMinutes", 30),
                                                 "unsettledRefundAlarmMinutes"),
    )


def _positive(value: Any, key: str) -> int:
    text = str(value).strip()
    number = int(text) if text.isdecimal() and not isinstance(value, bool) else 0
    if number < 1:
        raise ConfigError(f"context {key}={value!r}: expected a positive whole number of minutes")
    return number


def from_mapping(values: Mapping[str, Any]) -> StackConfig:
    return from_context(lambda key: values.get(key))

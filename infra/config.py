"""Deployment options, read from CDK context (``-c key=value`` or cdk.json).

Every option has a default that synthesizes offline; docs/infrastructure.md
lists them. Parsing is strict: a misspelt value fails the synth instead of
silently deploying something else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cadencia_shared.catalog import TOOLS
from infra.capacity import (
    BUSIEST_HOUR_SHARE,
    DEFAULT_ACCOUNT_CONCURRENCY,
    DEFAULT_MONTHLY_TURNS,
    TURN_SECONDS,
    UNRESERVED_MINIMUM,
    orchestrators_needed,
)
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
    # Retired ledger indexes a migrating stack keeps for one deploy beside their
    # successors (docs/infrastructure.md, *Migrating the ledger's indexes*).
    keep_retired_indexes: tuple[str, ...] = ()
    teardown: str = ""
    # The tools verify the database server with the RDS CA bundle (verify-full);
    # without the bundle the build fails unless this explicit opt-out is given.
    allow_unverified_db_tls: bool = False
    # Reserved concurrency per tool: each registry row's default, unless overridden.
    tool_concurrency: Mapping[str, int] = field(default_factory=lambda: {
        name: spec.reserved_concurrency for name, spec in TOOLS.items()})
    # Each orchestrator (API and WhatsApp) reserves this many: sized by infra/capacity.py from
    # ``monthlyTurns`` unless ``orchestratorConcurrency`` names it; also bounds model spend.
    orchestrator_concurrency: int = 20
    ingress_concurrency: int = 20  # the public WhatsApp URL: a flood of forged requests stays bounded
    reconciler_concurrency: int = 1
    account_concurrency: int = DEFAULT_ACCOUNT_CONCURRENCY
    # Refund reconciler (infra/reconciler.py): how often a pass runs, and after how
    # long a refund still unsettled with the gateway raises the alarm.
    reconciler_rate_minutes: int = 5
    unsettled_refund_alarm_minutes: int = 30
    # Approvals (infra/approvals.py): who may decide (comma-separated; empty: nobody,
    # so every call that needs approval is refused) and the refund threshold in R$.
    approvers: str = ""
    approval_threshold: str = "500"
    # Above this amount in R$ an approval needs two distinct people (cadencia_shared.approval_policy).
    two_person_amount: str = "2000.00"

    def total_reserved(self) -> int:
        """Every function's reservation in this stack (0 when reservations are off)."""
        if not self.reserved_concurrency:
            return 0
        return (2 * self.orchestrator_concurrency + sum(self.tool_concurrency.values())
                + self.ingress_concurrency + self.reconciler_concurrency)

    def check_reservations(self) -> None:
        """Refused at synth: CloudFormation would fail the function update mid-deploy."""
        room = self.account_concurrency - UNRESERVED_MINIMUM
        if self.total_reserved() > room:
            raise ConfigError(
                f"reserved concurrency {self.total_reserved()} (2 x orchestratorConcurrency "
                f"{self.orchestrator_concurrency} + tools + ingress + reconciler) exceeds accountConcurrency "
                f"{self.account_concurrency} - {UNRESERVED_MINIMUM} kept unreserved: request a Lambda "
                "concurrency quota increase and pass it as -c accountConcurrency=...")

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


class Lookup(Protocol):
    """A context lookup: the value of ``key``, or ``default`` when it is unset or empty."""

    def __call__(self, key: str, default: Any = None, /) -> Any: ...


def _retired_indexes(opt: Lookup) -> tuple[str, ...]:
    """``keepRetiredIndexes``: names of retired ledger indexes to keep this deploy.
    ``keepLegacyHistoryIndex=true`` (the history index's migration, as first
    documented) still means ``porConversa``. An unknown name is refused: a typo would
    otherwise drop the index it meant to keep (the ledger's check, refused here at
    parse time rather than when the table is synthesized)."""
    from cadencia_shared.ledger import LEGACY_GSI_BY_CONVERSATION, require_retired_indexes

    names = _list(opt("keepRetiredIndexes", ""))
    try:
        require_retired_indexes(names)
    except ValueError as err:
        raise ConfigError(f"keepRetiredIndexes: {err}") from None
    if _bool(opt("keepLegacyHistoryIndex", False), "keepLegacyHistoryIndex"):
        names += (LEGACY_GSI_BY_CONVERSATION,)
    return tuple(sorted(set(names)))


def _lookup(get: Callable[[str], Any]) -> Lookup:
    """A context lookup where an unset or empty value is the default."""

    def opt(key: str, default: Any = None) -> Any:
        value = get(key)
        return default if value is None or value == "" else value

    return opt


def _choice(opt: Lookup, key: str, choices: tuple[str, ...], default: str) -> str:
    value = str(opt(key, default))
    if value not in choices:
        raise ConfigError(f"context {key}={value!r}: expected one of {tuple(c for c in choices if c)}")
    return value


IMPORTED_KEYS = ("dbClusterIdentifier", "dbClusterResourceId", "dbEndpoint", "dbSecurityGroupId", "vpcId",
                 "availabilityZones", "privateSubnetIds")


def _imported_database(opt: Lookup) -> ImportedDatabase:
    missing = [k for k in IMPORTED_KEYS if opt(k) is None]
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
    return imported


def _tool_concurrency(opt: Lookup) -> dict[str, int]:
    """The registry rows' defaults, updated by ``toolConcurrency`` (JSON, by tool name)."""
    concurrency = dict(StackConfig().tool_concurrency)
    override = opt("toolConcurrency")
    if override is not None:
        values = json.loads(override) if isinstance(override, str) else dict(override)
        unknown = set(values) - set(concurrency)
        if unknown:
            raise ConfigError(f"toolConcurrency names unknown tools: {sorted(unknown)}")
        for name, value in values.items():
            # JSON whole numbers only: "5", 5.5 and true are refused, not coerced.
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"toolConcurrency {name}={value!r}: expected a whole number >= 0")
        concurrency.update(values)
    return concurrency


def _capacity(opt: Lookup) -> tuple[float, float]:
    min_acu = float(opt("dbMinCapacity", 0))
    max_acu = float(opt("dbMaxCapacity", 2))
    if not (0 <= min_acu <= max_acu <= 256) or max_acu < 1:
        raise ConfigError("dbMinCapacity/dbMaxCapacity: 0 <= min <= max, max >= 1 ACU")
    return min_acu, max_acu


def _model_id(opt: Lookup, provider: str) -> str:
    model_id = opt("modelId", DEFAULT_MODEL_IDS.get(provider))
    if model_id is None:
        raise ConfigError(
            "context modelProvider=bedrock needs -c modelId=<the Bedrock model or inference-profile id "
            "your account offers, e.g. us.anthropic.<model>-v1:0>"
        )
    return str(model_id)


def from_context(get: Callable[[str], Any]) -> StackConfig:
    """Build the config from ``node.try_get_context``-like lookups."""
    opt = _lookup(get)
    provider = _choice(opt, "modelProvider", PROVIDERS, "anthropic")
    database = _choice(opt, "database", DATABASE_MODES, "demo")
    min_acu, max_acu = _capacity(opt)
    return StackConfig(
        model_provider=provider,
        model_id=_model_id(opt, provider),
        bedrock_regions=_list(opt("bedrockRegions", ",".join(DEFAULT_BEDROCK_REGIONS))),
        database=database,
        imported=_imported_database(opt) if database == "imported" else None,
        db_min_capacity=min_acu,
        db_max_capacity=max_acu,
        seed_demo_data=_bool(opt("seedDemoData", False), "seedDemoData"),
        gateway_url=str(opt("gatewayUrl", DEFAULT_GATEWAY_URL)),
        alarm_email=opt("alarmEmail"),
        reserved_concurrency=_bool(opt("reservedConcurrency", True), "reservedConcurrency"),
        ledger_deletion_protection=_bool(opt("ledgerDeletionProtection", True), "ledgerDeletionProtection"),
        keep_retired_indexes=_retired_indexes(opt),
        teardown=_choice(opt, "teardown", TEARDOWN_PHASES, ""),
        allow_unverified_db_tls=_bool(opt("allowUnverifiedDbTls", False), "allowUnverifiedDbTls"),
        tool_concurrency=_tool_concurrency(opt),
        orchestrator_concurrency=_orchestrator_concurrency(opt),
        account_concurrency=_whole(opt("accountConcurrency", DEFAULT_ACCOUNT_CONCURRENCY), "accountConcurrency",
                                   minimum=UNRESERVED_MINIMUM + 1),
        reconciler_rate_minutes=_positive(opt("reconcilerRateMinutes", 5), "reconcilerRateMinutes"),
        unsettled_refund_alarm_minutes=_positive(opt("unsettledRefundAlarmMinutes", 30),
                                                 "unsettledRefundAlarmMinutes"),
        approvers=_approvers(opt("approvers", "")),
        approval_threshold=_amount(opt("approvalThreshold", "500")),
        two_person_amount=_two_person_amount(opt("twoPersonAmount", "2000.00")),
    )


def _approvers(value: Any) -> str:
    from cadencia_shared.settings import ApprovalSettings

    try:
        return ",".join(sorted(ApprovalSettings.from_env({"APROVADORES": str(value)}).approvers))
    except ValueError as err:
        raise ConfigError(f"context approvers={value!r}: {err}") from None


def _amount(value: Any) -> str:
    from cadencia_shared.settings import ApprovalSettings

    try:
        return str(ApprovalSettings.from_env({"APROVACAO_LIMITE_REAIS": str(value)}).threshold)
    except ValueError:
        raise ConfigError(f"context approvalThreshold={value!r}: expected an amount in R$") from None


def _two_person_amount(value: Any) -> str:
    from cadencia_shared.approval_policy import PolicySettings

    try:
        return str(PolicySettings.from_env({"APROVACAO_DUPLA_ACIMA_REAIS": str(value)}).two_person_above)
    except ValueError:
        raise ConfigError(f"context twoPersonAmount={value!r}: expected an amount in R$") from None


def _whole(value: Any, key: str, *, minimum: int) -> int:
    text = str(value).strip()
    number = int(text) if text.isdecimal() and not isinstance(value, (bool, float)) else -1
    if number < minimum:
        raise ConfigError(f"context {key}={value!r}: expected a whole number >= {minimum}")
    return number


def _orchestrator_concurrency(opt: Lookup) -> int:
    """``orchestratorConcurrency`` as given, or sized from ``monthlyTurns`` (infra/capacity.py)."""
    explicit, turns = opt("orchestratorConcurrency"), opt("monthlyTurns")
    seconds = _fraction(opt("turnSeconds", TURN_SECONDS), "turnSeconds", 0.1, 900)
    share = _fraction(opt("busiestHourShare", BUSIEST_HOUR_SHARE), "busiestHourShare", 1 / 24, 1)
    if explicit is not None:
        if turns is not None:
            raise ConfigError("give monthlyTurns (the reservation sized from it) or orchestratorConcurrency, not both")
        return _whole(explicit, "orchestratorConcurrency", minimum=1)
    monthly = _whole(DEFAULT_MONTHLY_TURNS if turns is None else turns, "monthlyTurns", minimum=1)
    return orchestrators_needed(monthly, turn_seconds=seconds, busiest_hour_share=share)


def _fraction(value: Any, key: str, low: float, high: float) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not low <= number <= high:  # NaN fails both
        raise ConfigError(f"context {key}={value!r}: expected a number from {low:.3g} to {high:.3g}")
    return number


def _positive(value: Any, key: str) -> int:
    text = str(value).strip()
    number = int(text) if text.isdecimal() and not isinstance(value, bool) else 0
    if number < 1:
        raise ConfigError(f"context {key}={value!r}: expected a positive whole number of minutes")
    return number


def from_mapping(values: Mapping[str, Any]) -> StackConfig:
    return from_context(lambda key: values.get(key))

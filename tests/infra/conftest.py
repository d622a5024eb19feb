"""Fixtures for the infrastructure tests.

Each CDK variant is synthesized once per test session, in-process and offline
(no AWS credentials; ``aws:cdk:disable-asset-staging`` keeps the 100 MB of
assets where packaging built them instead of copying them per synth).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

IMPORTED_CONTEXT = {
    "database": "imported",
    "dbClusterIdentifier": "erp-prod",
    "dbClusterResourceId": "cluster-ABCDEFGHIJKLMNOPQRSTUVWXY0",
    "dbEndpoint": "erp-prod.cluster-abc123.us-east-1.rds.amazonaws.com",
    "dbSecurityGroupId": "sg-0123456789abcdef0",
    "vpcId": "vpc-0123456789abcdef0",
    "availabilityZones": "us-east-1a,us-east-1b",
    "privateSubnetIds": "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2",
}
BEDROCK_IMPORTED_CONTEXT = {"modelProvider": "bedrock", "modelId": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                            **IMPORTED_CONTEXT}


@dataclass
class Synth:
    context: dict[str, Any]
    template: dict[str, Any]
    stack: Any
    app: Any
    config: Any
    seconds: float
    nag_report: Any = None

    @property
    def resources(self) -> dict[str, Any]:
        return self.template["Resources"]

    def of_type(self, kind: str) -> dict[str, Any]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}


def synthesize(context: dict[str, Any], outdir: Path, *, nag: bool = True) -> Synth:
    import time

    from cdk_nag import AwsSolutionsChecks

    from infra.app import build_app

    started = time.monotonic()
    app, stack, config = build_app({**context, "aws:cdk:disable-asset-staging": True}, outdir=str(outdir),
                                   nag=nag, progress=lambda message: None)
    assembly = app.synth()  # with nag=True the policy-validation plugin fails this on any finding
    template = json.loads(Path(assembly.directory, f"{stack.stack_name}.template.json").read_text())
    seconds = time.monotonic() - started
    report = AwsSolutionsChecks().validate_scope(stack)
    return Synth(context, template, stack, app, config, seconds, report)


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize({}, tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Bedrock provider + an imported ERP cluster: every branch the default does not take."""
    return synthesize(BEDROCK_IMPORTED_CONTEXT, tmp_path_factory.mktemp("cdk-variant"))


@pytest.fixture(scope="session")
def teardown_synths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synth]:
    """The two intermediate stacks scripts/limpeza.sh deploys (no packaging needed)."""
    return {phase: synthesize({"teardown": phase}, tmp_path_factory.mktemp(f"cdk-{phase}"))
            for phase in ("functions", "database-users")}


@pytest.fixture(scope="session")
def all_synths(default_synth: Synth, variant_synth: Synth, teardown_synths: dict[str, Synth]) -> dict[str, Synth]:
    return {"default": default_synth, "bedrock+imported": variant_synth,
            **{f"teardown={k}": v for k, v in teardown_synths.items()}}


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL (the local stack's helper), without moto or the gateway:
    an empty database owned by an RDS-style master (not a superuser), as RDS hands it over."""
    from scripts.local_stack import postgres

    info = postgres.start_cluster()
    try:
        yield info
    finally:
        postgres.stop_cluster(info)

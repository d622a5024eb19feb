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
# The variant deploys without the RDS CA bundle through the explicit, documented opt-out.
BEDROCK_IMPORTED_CONTEXT = {"modelProvider": "bedrock", "modelId": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                            "allowUnverifiedDbTls": "true", **IMPORTED_CONTEXT}


def write_test_ca(path: Path) -> Path:
    """A self-signed CA certificate in PEM, standing in for AWS's RDS bundle (which
    cannot be downloaded here): packaging checks it is a loadable CA bundle."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Cadencia test CA (not RDS)")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


@pytest.fixture(scope="session", autouse=True)
def test_ca_bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every infra test builds tool assets with a CA bundle unless it opts out explicitly."""
    previous = os.environ.get("CADENCIA_RDS_CA_BUNDLE")
    path = write_test_ca(tmp_path_factory.mktemp("ca") / "global-bundle.pem")
    os.environ["CADENCIA_RDS_CA_BUNDLE"] = str(path)
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop("CADENCIA_RDS_CA_BUNDLE", None)
        else:
            os.environ["CADENCIA_RDS_CA_BUNDLE"] = previous


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
    ca_bundle = os.environ.get("CADENCIA_RDS_CA_BUNDLE")
    if str(context.get("allowUnverifiedDbTls", "")).lower() == "true":
        os.environ["CADENCIA_RDS_CA_BUNDLE"] = str(outdir / "no-bundle-here.pem")  # really without one
    try:
        app, stack, config = build_app({**context, "aws:cdk:disable-asset-staging": True}, outdir=str(outdir),
                                       nag=nag, progress=lambda message: None)
        assembly = app.synth()  # with nag=True the policy-validation plugin fails this on any finding
    finally:
        if ca_bundle is not None:
            os.environ["CADENCIA_RDS_CA_BUNDLE"] = ca_bundle
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

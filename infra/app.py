"""CDK entry point (cdk.json runs ``python -m infra.app``).

Synthesizes offline without AWS credentials: the stack is environment-agnostic
(account and region are resolved at deploy time), and every Lambda asset is
built locally by ``infra/packaging.py``. cdk-nag's AwsSolutions pack runs as a
policy-validation plugin, so an unacknowledged finding fails ``cdk synth``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from cadencia_shared.catalog import (
    DECISION_FUNCTION_NAME,
    DECISION_PACKAGE,
    ORCHESTRATOR_FUNCTION_NAME,
    RECONCILER_FUNCTION_NAME,
    RECONCILER_PACKAGE,
    TOOLS,
)
from canal_whatsapp.settings import HUMAN_REPLY_FUNCTION_NAME, INGRESS_FUNCTION_NAME

from . import contract, packaging
from .config import StackConfig, from_context
from .console_authorizer import CONSOLE_AUTHORIZER_PACKAGE
from .operator_contract import CONSOLE_AUTHORIZER_FUNCTION_NAME
from .stack import CadenciaStack

ROOT = packaging.ROOT


# Each function's asset carries only what its own code imports: the
# profile tool's validators (phonenumbers, email-validator + dnspython) and the
# gateway client's urllib3 are not in the other assets (a tool's row names its file).


def _requirements(name: str) -> Path:
    return ROOT / "requirements" / name


def asset_specs() -> list[packaging.AssetSpec]:
    shared = ROOT / "functions" / "cadencia_shared"
    specs = [
        packaging.AssetSpec(
            name=tool.function_name,
            sources=(ROOT / "functions" / tool.package, shared),
            requirements=_requirements(tool.requirements),
            include_ca_bundle=True,  # the tools talk to PostgreSQL
        )
        for tool in TOOLS.values()
    ]
    specs.append(packaging.AssetSpec(  # the reconciler runs the refund's own state machine
        name=RECONCILER_FUNCTION_NAME,
        sources=(ROOT / "functions" / RECONCILER_PACKAGE, ROOT / "functions" / "emitir_reembolso", shared),
        requirements=_requirements("lambda-reconciler.txt"),  # no SEAL edge: no cryptography
        include_ca_bundle=True,
    ))
    specs.append(packaging.AssetSpec(  # approval decisions: no database, no gateway
        name=DECISION_FUNCTION_NAME,
        sources=(ROOT / "functions" / DECISION_PACKAGE, shared),
        requirements=_requirements("lambda-decision.txt"),
    ))
    specs.append(packaging.AssetSpec(  # the console's cookie authorizer: RS256 checks, nothing else
        name=CONSOLE_AUTHORIZER_FUNCTION_NAME, sources=(ROOT / "functions" / CONSOLE_AUTHORIZER_PACKAGE, shared),
        requirements=_requirements("lambda-console-authorizer.txt"),
    ))
    channel = ROOT / "functions" / "canal_whatsapp"
    specs.append(packaging.AssetSpec(  # + the channel's outbox: a decided approval's message to a WhatsApp customer
        name=ORCHESTRATOR_FUNCTION_NAME,
        sources=(ROOT / "orchestrator", channel, shared),
        requirements=ROOT / "requirements" / "lambda-orchestrator.txt",
    ))
    specs.append(packaging.AssetSpec(  # the webhook talks to PostgreSQL (its own user)
        name=INGRESS_FUNCTION_NAME, sources=(channel, shared),
        requirements=ROOT / "requirements" / "lambda-tools.txt", include_ca_bundle=True,
    ))
    specs.append(packaging.AssetSpec(  # the orchestrator + the channel's sender
        name=contract.WHATSAPP_CONSUMER_FUNCTION_NAME, sources=(ROOT / "orchestrator", channel, shared),
        requirements=_requirements("lambda-orchestrator-whatsapp.txt"),  # + urllib3 (the Graph sender)
    ))
    specs.append(packaging.AssetSpec(  # a person's reply: the conversation's history + the channel's sender, no model
        name=HUMAN_REPLY_FUNCTION_NAME, sources=(ROOT / "orchestrator", channel, shared),
        requirements=_requirements("lambda-human-reply.txt"),
    ))
    return specs


def _stderr(message: str) -> None:
    # stdout of `cdk synth` is the template; progress goes to stderr.
    print(message, file=sys.stderr, flush=True)


def build_app(context: Mapping[str, Any] | None = None, *, outdir: str | None = None, nag: bool = True,
              progress: Callable[[str], None] = _stderr) -> tuple[cdk.App, CadenciaStack, StackConfig]:
    app = cdk.App(context=dict(context or {}), outdir=outdir, analytics_reporting=False)
    config = from_context(app.node.try_get_context)
    config.check_reservations()  # before minutes of packaging, not at CloudFormation's update
    assets = packaging.build_all(asset_specs(), progress, allow_unverified_db_tls=config.allow_unverified_db_tls) \
        if config.deploy_functions else {}
    stack = CadenciaStack(app, contract.STACK_NAME, config=config, assets=assets)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack, config


def main() -> None:
    app, _, _ = build_app()
    app.synth()


if __name__ == "__main__":
    main()

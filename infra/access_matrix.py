"""The access matrix (docs/access-matrix.md), rendered from the least-privilege contract
(``infra/contract.py``): the default stack's roles, then what the variants change.
``python -m infra.contract --write-doc`` (or ``python -m infra.derived --write``) rewrites
the block; tests/infra/test_access_matrix_doc.py fails when the two differ."""

from __future__ import annotations

import sys
from pathlib import Path

from .config import StackConfig
from .contract import ARN_PREFIX, REGION_ACCOUNT, build, orchestrator_role, scoped
from .endpoint_policy import dynamodb_grants


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{_cell(text)}`"


def render_markdown() -> str:
    """The access matrix for docs/access-matrix.md: the default stack, then what the variants change."""
    default = StackConfig()
    lines = [
        "How to deploy, the network and what it costs (idle and per 1,000 conversations), and the ordered "
        "teardown: [infrastructure.md](infrastructure.md).",
        "",
        "Generated from `infra/contract.py` (`python -m infra.contract`); `tests/infra/test_access_matrix_doc.py` "
        "fails when this block and the contract differ, and `tests/infra/test_contract.py` fails when the "
        "synthesized template grants anything else. Resources use the template's logical ids: `${X}` is the "
        "ARN (Ref) of resource X, `${X.Arn}` its `Arn` attribute.",
        "",
        "| role | action | resource | why |",
        "|---|---|---|---|",
    ]
    for role in build(default):
        title = f"**{role.role_name or role.logical_id}**<br>{_cell(role.purpose)}"
        first = True
        for grant in role.grants:
            for resource in grant.resources:
                actions = "<br>".join(_code(a) for a in grant.actions)
                where = _code(scoped(resource, grant.leading_keys))
                lines.append(f"| {title if first else ''} | {actions} | {where} | {_cell(grant.why)} |")
                first = False
        for policy in role.managed_policies:
            granted = "<br>".join(_code(a) for a in policy.grants)
            lines.append(f"| | managed policy {_code(policy.name)}:<br>{granted} | `*` | {_cell(policy.why)} |")
    endpoint = "; ".join(", ".join(_code(a) for a in g.actions) + " on "
                         + ", ".join(_code(scoped(r, g.leading_keys)) for r in g.resources)
                         for g in dynamodb_grants(default))
    lines += ["", "The demo VPC's DynamoDB gateway endpoint (every DynamoDB call from its private subnets goes "
              "through it) allows, for any principal, exactly the DynamoDB grants of the roles above whose "
              "functions run in the VPC (`infra/endpoint_policy.py`; `tests/infra/test_vpc_endpoints.py` "
              "compares it with those roles on the template): " + endpoint + "."]
    lines += ["", "Variants (context values, see [infrastructure.md](infrastructure.md)):", ""]
    example_model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    bedrock = StackConfig(model_provider="bedrock", model_id=example_model)
    orch = orchestrator_role(bedrock)
    model = next(g for g in orch.grants if g.actions == ("bedrock:InvokeModel",))
    lines.append(
        "- `modelProvider=bedrock` (with `-c modelId=...`, here the example " + _code(example_model) + "): the "
        "orchestrator has no `secretsmanager:GetSecretValue` and no API-key secret "
        "exists; instead `bedrock:InvokeModel` on exactly " + ", ".join(_code(r) for r in model.resources)
        + " (the inference profile and its foundation model in each region it routes to, `bedrockRegions`)."
    )
    lines.append(
        "- `database=imported`: no demo cluster, no `cadencia-db-users` role and no flow-log role; each tool's "
        "`rds-db:connect` names the imported cluster's resource id: " + _code(
            f"{ARN_PREFIX}:rds-db:{REGION_ACCOUNT}:dbuser:<dbClusterResourceId>/<its user>")
        + "; the users and GRANTs are applied with `scripts/grants.sh`; the stack creates no VPC endpoint: a "
        "DynamoDB endpoint of the ERP's VPC must allow at least the endpoint's calls above."
    )
    return "\n".join(lines) + "\n"


DOC = Path(__file__).resolve().parents[1] / "docs" / "access-matrix.md"
# The generated-block markers every measured or derived doc block uses (scripts/doc_blocks.py).
DOC_START = "<!-- BEGIN generated:access-matrix -->"
DOC_END = "<!-- END generated:access-matrix -->"


def doc_block(doc_text: str) -> str:
    start = doc_text.index(DOC_START) + len(DOC_START)
    end = doc_text.index(DOC_END)
    return doc_text[start:end].strip("\n") + "\n" if doc_text[start:end].strip() else ""


def with_matrix(doc_text: str) -> str:
    start = doc_text.index(DOC_START) + len(DOC_START)
    end = doc_text.index(DOC_END)
    return doc_text[:start] + "\n" + render_markdown() + doc_text[end:]


def main() -> None:
    if sys.argv[1:] == ["--write-doc"]:
        DOC.write_text(with_matrix(DOC.read_text()))
    else:
        print(render_markdown(), end="")


if __name__ == "__main__":
    main()

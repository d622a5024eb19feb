"""cdk-nag AwsSolutions (zero unacknowledged findings) and cfn-lint (zero findings
besides W3005) on every synthesized variant."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra import base as base_module

VARIANTS = ["default", "bedrock+imported", "teardown=functions", "teardown=database-users"]


def _violations(report):
    return [(v.rule_name, [r.construct_path for r in v.violating_resources]) for v in report.violations]


@pytest.mark.infra
@pytest.mark.parametrize("variant", VARIANTS)
def test_cdk_nag_aws_solutions_has_no_unacknowledged_finding(all_synths, variant):
    report = all_synths[variant].nag_report
    assert report.success, json.dumps(_violations(report), indent=2)


def _acknowledgements(construct):
    """(path, rule id, reason) of every AwsSolutions acknowledgement in the tree (CDK adds
    a few of its own for its synth-time annotations, e.g. W3010; those are not ours)."""
    from aws_cdk import Validations

    found = []
    for node in construct.node.find_all():
        for entry in node.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY and entry.data:
                for rule, reason in entry.data.items():
                    rule = rule.split("::", 1)[-1]
                    if rule.startswith("AwsSolutions-"):
                        found.append((node.node.path, rule, reason))
    return found


@pytest.mark.infra
def test_every_acknowledgement_is_specific(default_synth, variant_synth):
    acks = _acknowledgements(default_synth.stack) + _acknowledgements(variant_synth.stack)
    assert acks
    for path, rule, reason in acks:
        assert len(reason) >= 80, f"{path} {rule}: the reason is too short to say why: {reason!r}"
    # No blanket acknowledgement on the stack or the app: each one sits on its resource.
    assert all(path.count("/") >= 1 for path, _, _ in acks), [p for p, _, _ in acks if "/" not in p]


@pytest.mark.infra
def test_no_acknowledgement_is_stale(default_synth, tmp_path_factory, monkeypatch):
    """Synthesize without acknowledgements: nag must find exactly what was acknowledged."""
    from .conftest import synthesize

    acked = {(path, rule) for path, rule, _ in _acknowledgements(default_synth.stack)}
    monkeypatch.setattr(base_module, "ack", lambda construct, rule, reason: None)
    raw = synthesize({}, tmp_path_factory.mktemp("cdk-raw"), nag=False).nag_report
    findings = {(path, rule) for rule, paths in _violations(raw) for path in paths}
    unexplained = {f for f in findings if not any(f[0].startswith(p + "/") or f[0] == p for p, r in acked
                                                  if r == f[1])}
    unused = {a for a in acked if not any(f[1] == a[1] and (f[0].startswith(a[0] + "/") or f[0] == a[0])
                                          for f in findings)}
    assert not unexplained, unexplained
    assert not unused, f"acknowledgements with no finding behind them: {unused}"
    print(f"\n{len(acked)} acknowledgements cover {len(findings)} raw AwsSolutions findings")


@pytest.mark.infra
@pytest.mark.parametrize("variant", VARIANTS)
def test_cfn_lint_reports_nothing_but_w3005(all_synths, variant, tmp_path):
    path = tmp_path / "template.json"
    path.write_text(json.dumps(all_synths[variant].template))
    # The same command a reviewer runs (the console script of the pinned cfn-lint).
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    proc = subprocess.run([str(cfn_lint), "--format", "json", "--ignore-checks", "W3005", "--", str(path)],
                          capture_output=True, text=True)
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], json.dumps(findings, indent=2)
    assert proc.returncode == 0, proc.stderr

"""The Makefile names the everyday commands: `make help` lists them, each listed target exists and
is one line calling a script of this repository (the scripts stay the documented way in)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVERYDAY = {"setup", "test", "quick", "prova", "chat", "up", "down", "bench", "synth"}

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _help() -> dict[str, str]:
    proc = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    targets = {}
    for line in proc.stdout.splitlines():
        name, _, what = line.partition(" ")
        targets[name] = what.strip()
    return targets


def test_make_help_lists_the_everyday_commands_with_a_description():
    targets = _help()
    assert EVERYDAY <= set(targets), sorted(EVERYDAY - set(targets))
    assert all(targets.values()), targets


@pytest.mark.parametrize("target", sorted(EVERYDAY))
def test_each_listed_target_is_one_line_calling_an_existing_script(target):
    assert target in _help()
    proc = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"make {target}: {proc.stderr}"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    words = shlex.split(lines[0])
    program = words[1] if words[0].endswith("/python") else words[0]
    if program == "npx":  # the CDK CLI from node_modules (scripts/setup.sh installs it)
        assert (ROOT / "package.json").is_file() and "aws-cdk" in (ROOT / "package.json").read_text()
        return
    assert (ROOT / program).is_file(), f"make {target} calls {program}, which does not exist"


def test_a_target_missing_from_the_makefile_is_an_error_not_a_silent_success():
    proc = subprocess.run(["make", "-n", "no-such-target"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0

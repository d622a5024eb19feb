"""The test layers hold: stack tests are marked by the fixtures they use, and a test
without the ``stack`` marker that starts or uses the local stack fails, even when it
swallows the error or does it in a child process (tests/conftest.py,
scripts/local_stack/layer_guard.py).

The end-to-end checks run an inner pytest session over throwaway test files that import
this suite's conftest, so they exercise the real hooks; nothing there can start a
process (the "running stack" is a state file, the starts are intercepted first).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scripts.local_stack import postgres, stack
from scripts.local_stack.layer_guard import FORBIDDEN_ENV

ROOT = Path(__file__).resolve().parents[1]

INNER_TESTS = '''
import os
import subprocess
import sys

import pytest

from scripts.local_stack import stack
from scripts.local_stack.layer_guard import FORBIDDEN_ENV


@pytest.fixture
def through_another_fixture(local_stack):
    return local_stack


def test_direct(local_stack):
    pass


def test_indirect(through_another_fixture):
    pass


def test_tool_runner(tools):
    pass


def test_pure():
    pass


def test_in_process_moto(mocked_aws):
    assert mocked_aws["ledger"] is not None


def test_swallows_the_refusal():
    try:
        stack.load()
    except RuntimeError:
        pass


def test_uses_the_stack_in_a_child_process():
    subprocess.run([sys.executable, "-c", "from scripts.local_stack import stack; stack.load()"],
                   capture_output=True, check=False)


def test_finds_no_stack(tmp_path, monkeypatch):
    monkeypatch.setenv("CADENCIA_LOCAL_STACK_DIR", str(tmp_path))
    assert stack.load() is None


@pytest.mark.stack
def test_marked_by_hand():
    assert FORBIDDEN_ENV not in os.environ
'''


def _inner_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F401,F403\n")
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    (tmp_path / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        addopts = -p no:cacheprovider --strict-markers
        markers =
            stack: stack layer
            infra: infra layer
        """))
    running = tmp_path / "running-stack"  # a state file is all stack.load() needs to find one
    running.mkdir(exist_ok=True)
    (running / "state.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if k != FORBIDDEN_ENV}
    env.update(PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'functions'}", CADENCIA_LOCAL_STACK_DIR=str(running))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def _selected(output: str) -> set[str]:
    return {line.split("::")[1] for line in output.splitlines() if line.startswith("test_inner.py::")}


def test_tests_are_marked_stack_by_the_fixtures_they_use(tmp_path):
    stack_layer = _inner_pytest(tmp_path, "--collect-only", "-m", "stack")
    assert _selected(stack_layer.stdout) == {"test_direct", "test_indirect", "test_tool_runner",
                                             "test_marked_by_hand"}, stack_layer.stdout
    unit_layer = _inner_pytest(tmp_path, "--collect-only", "-m", "not stack")
    assert _selected(unit_layer.stdout) == {"test_pure", "test_in_process_moto", "test_swallows_the_refusal",
                                            "test_uses_the_stack_in_a_child_process",
                                            "test_finds_no_stack"}, unit_layer.stdout


def test_using_the_stack_without_the_marker_fails_the_test(tmp_path):
    # Without the three that would really start the shared stack.
    run = _inner_pytest(tmp_path, "-k", "not direct and not indirect and not tool_runner")
    outcomes = {line.split(" ", 1)[0] + " " + line.split("::")[1].split(" ")[0]
                for line in run.stdout.splitlines() if "test_inner.py::" in line and line.split(" ", 1)[0].isupper()}
    assert "PASSED test_pure" in outcomes, run.stdout
    assert "PASSED test_in_process_moto" in outcomes, run.stdout
    assert "PASSED test_finds_no_stack" in outcomes, run.stdout
    assert "PASSED test_marked_by_hand" in outcomes, run.stdout
    for name in ("test_swallows_the_refusal", "test_uses_the_stack_in_a_child_process"):
        assert f"ERROR {name}" in outcomes, run.stdout  # fails at teardown, where the report is read
    assert run.stdout.count("uses the local stack without the `stack` marker") >= 2, run.stdout
    assert run.returncode == 1


def test_starting_is_refused_before_anything_starts(tmp_path, monkeypatch):
    report = tmp_path / "attempts.txt"
    monkeypatch.setenv(FORBIDDEN_ENV, str(report))

    def must_not_be_reached(*args, **kwargs):
        raise AssertionError("the guard let a start through")

    monkeypatch.setattr(postgres, "find_bin_dir", must_not_be_reached)
    monkeypatch.setattr(stack, "load", must_not_be_reached)
    with pytest.raises(RuntimeError, match="forbidden in this test layer"):
        postgres.start_cluster()
    with pytest.raises(RuntimeError, match="forbidden in this test layer"):
        stack.up()
    assert report.read_text().splitlines()[0].startswith("PostgreSQL cluster start")
    assert report.read_text().splitlines()[1].startswith("local stack start")

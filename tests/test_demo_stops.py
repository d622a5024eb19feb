"""``scripts/demo.sh`` stops what it starts: after it ends — normally, or on a Ctrl-C — no process it
started (the stack server holding moto and the gateway, PostgreSQL) is alive and none of their
ports answers. A stack that was already running is left alone.

The demo runs as a person runs it (its own process group, like a terminal's foreground job), with a
private state directory; what it started is read from that directory's ``state.json`` while it runs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from scripts.local_stack import stack

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parents[1]


def _environment(state_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CADENCIA_TEST_STACK_DIR",)}
    env["CADENCIA_LOCAL_STACK_DIR"] = str(state_dir)
    return env


def _start(state_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(["./scripts/demo.sh"], cwd=ROOT, env=_environment(state_dir), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)


def _started(state_dir: Path, proc: subprocess.Popen, timeout_s: float = 300) -> dict:
    """What the demo's stack is, read as soon as it is up (the demo then runs for seconds)."""
    state_file = state_dir / "state.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if state_file.exists():
            try:
                return json.loads(state_file.read_text())
            except json.JSONDecodeError:
                pass  # being written
        assert proc.poll() is None or state_file.exists(), f"demo ended before its stack was up: {proc.stdout.read()}"
        time.sleep(0.02)
    raise AssertionError("the demo's stack never came up")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _postgres_pids(data_dir: str) -> list[int]:
    pids = []
    for proc_dir in Path("/proc").iterdir():
        if proc_dir.name.isdigit():
            try:
                cmdline = (proc_dir / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if data_dir.encode() in cmdline:
                pids.append(int(proc_dir.name))
    return pids


def _processes_of(state_dir: Path) -> list[int]:
    """Every process that inherited the demo's private state directory (its children, theirs, PostgreSQL)."""
    marker = f"CADENCIA_LOCAL_STACK_DIR={state_dir}".encode()
    pids = []
    for proc_dir in Path("/proc").iterdir():
        if proc_dir.name.isdigit() and int(proc_dir.name) != os.getpid():
            try:
                environ = (proc_dir / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker in environ and _alive(int(proc_dir.name)):
                pids.append(int(proc_dir.name))
    return pids


def _leftovers(started: dict) -> list[str]:
    found = [f"process {pid}" for pid in _processes_of(Path(started["directory"]))]
    if _alive(started["server_pid"]):
        found.append(f"stack server pid {started['server_pid']}")
    for name in ("aws_endpoint", "gateway_url"):
        port = int(started[name].rsplit(":", 1)[1])
        if _answers(port):
            found.append(f"{name} port {port}")
    pg = started["postgres"]
    if _answers(int(pg["port"])):
        found.append(f"postgres port {pg['port']}")
    if pg.get("data_dir") and _postgres_pids(pg["data_dir"]):
        found.append(f"postgres processes {_postgres_pids(pg['data_dir'])}")
    return found


def _kill_leftovers(started: dict) -> None:
    """Clean up after a failing run, so one failure does not leak processes into the rest of the suite."""
    for pid in _processes_of(Path(started["directory"])):
        os.kill(pid, signal.SIGKILL)
    if _alive(started["server_pid"]):
        os.killpg(started["server_pid"], signal.SIGKILL)
    for pid in _postgres_pids(started["postgres"].get("data_dir") or "\0"):
        os.kill(pid, signal.SIGKILL)


def test_the_demo_stops_the_stack_it_started(tmp_path):
    proc = _start(tmp_path)
    started = _started(tmp_path, proc)
    output, _ = proc.communicate(timeout=300)
    try:
        assert proc.returncode == 0, output[-3000:]
        assert "first call debited, repeat blocked" in output
        deadline = time.monotonic() + 5  # PostgreSQL's fast shutdown has returned; sockets close with it
        while _leftovers(started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _leftovers(started) == [], output[-3000:]
    finally:
        _kill_leftovers(started)


def test_a_ctrl_c_during_the_demo_still_stops_its_stack(tmp_path):
    proc = _start(tmp_path)
    started = _started(tmp_path, proc)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the foreground job on Ctrl-C
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode != 0, "an interrupted demo must not report success"
        assert _leftovers(started) == [], output[-3000:]
    finally:
        _kill_leftovers(started)


def test_a_ctrl_c_while_the_stack_is_starting_leaves_nothing_behind(tmp_path):
    """Interrupted half-way through `up` (the stack server is up, state.json not written yet)."""
    proc = _start(tmp_path)
    ready = tmp_path / "server.json"
    deadline = time.monotonic() + 300
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not (tmp_path / "state.json").exists(), "the stack came up before the test could interrupt it"
    try:
        os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode != 0
        left: list[int] = []
        for _ in range(50):  # the interrupted start's own clean-up has returned; exits are reaped
            left = _processes_of(tmp_path)
            if not left:
                break
            time.sleep(0.1)
        assert left == [], output[-3000:]
    finally:
        for pid in _processes_of(tmp_path):
            os.kill(pid, signal.SIGKILL)


def test_a_stack_that_was_already_running_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("CADENCIA_LOCAL_STACK_DIR", str(tmp_path))
    running = stack.up()
    try:
        proc = _start(tmp_path)
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output[-3000:]
        assert all(stack.healthy(running).values()), "the demo stopped a stack it did not start"
    finally:
        assert stack.down() == []

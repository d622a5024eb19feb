"""Separate OS processes running the real handlers, and what the parent reads back.

``Fleet`` starts children through a multiprocessing forkserver that preloads the
handler modules (a fork of a process that opened no client, thread or connection,
so nothing is shared but read-only code). Each child is its own PID: SIGKILL is the
kernel's, and concurrency is real (separate interpreters, separate connections).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cadencia_shared.catalog import TOOLS, ToolSpec

from . import child
from .child import SEAM_REACHED
from .sealing import Sealer

PRELOAD = [f"{spec.package}.handler" for spec in TOOLS.values()] + [
    "scripts.reliability.child", "scripts.reliability.hostile", "orchestrator.invokers.local"]


@dataclass
class Answer:
    """What one child process left behind."""

    label: str
    event: dict[str, Any]
    response: dict[str, Any] | None  # None: the process died before answering
    exitcode: int | None
    seam_reached: bool
    log: Path

    @property
    def killed(self) -> bool:
        return self.exitcode == -signal.SIGKILL


class Running:
    def __init__(self, process: multiprocessing.process.BaseProcess, spec: dict[str, Any], label: str) -> None:
        self.process = process
        self.spec = spec
        self.label = label

    @property
    def marker(self) -> Path:
        return Path(self.spec["marker"])

    def wait_for_seam(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.marker.exists():
                return True
            if not self.process.is_alive():
                return self.marker.exists()
            time.sleep(0.01)
        return False

    def kill(self) -> None:
        if self.process.pid is not None and self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)

    def join(self, timeout_s: float = 60) -> Answer:
        self.process.join(timeout_s)
        if self.process.is_alive():  # hung: that is a finding, and it must not outlive the run
            self.kill()
            self.process.join(5)
        result = Path(self.spec["result"])
        response = json.loads(result.read_text()) if result.exists() else None
        return Answer(self.label, self.spec["event"], response, self.process.exitcode,
                      self.marker.exists() and self.marker.read_text() == SEAM_REACHED, Path(self.spec["log"]))


class Fleet:
    def __init__(self, workdir: Path, environments: dict[str, dict[str, str]], sealer: Sealer) -> None:
        self.workdir = workdir
        self.sealer = sealer
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.environments = environments
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD + [f"{name}.handler" for name in environments if name not in TOOLS])
        self._ids = itertools.count(1)

    def start(self, tool: ToolSpec, event: Any, *, label: str = "", kill_at: str | None = None,
              env: dict[str, str] | None = None) -> Running:
        n = next(self._ids)
        base = self.workdir / f"{n:05d}"
        if tool.name in TOOLS and isinstance(event, dict):  # signed as a turn signs each call: one per process
            event = self.sealer(tool.name, event)
        spec = {
            "package": tool.package, "function_name": tool.function_name, "event": event,
            "env": {**self.environments[tool.name], **(env or {})}, "kill_at": kill_at,
            "result": f"{base}.result.json", "log": f"{base}.log", "marker": f"{base}.marker",
        }
        process = self.ctx.Process(target=child.run, args=(spec,), name=f"conf-{n}")
        process.start()
        return Running(process, spec, label)

    def probe(self, tool: ToolSpec, base: dict[str, Any], examples: int) -> dict[str, Any]:
        """Hostile events through one tool's handler, in a child process of its own."""
        from . import hostile

        n = next(self._ids)
        spec = {"package": tool.package, "function_name": tool.function_name, "env": self.environments[tool.name],
                "tool": tool.name, "seal": {"table": self.sealer.table, "endpoint": self.sealer.endpoint},
                "base": base, "examples": examples, "log": str(self.workdir / f"{n:05d}.log"),
                "result": str(self.workdir / f"{n:05d}.hostil.json")}
        process = self.ctx.Process(target=hostile.probe, args=(spec,), name=f"conf-hostil-{n}")
        process.start()
        process.join(900)
        if process.is_alive():
            process.kill()
            process.join(5)
        result = Path(spec["result"])
        if not result.exists():
            return {"contagem": {"quebra": examples}, "exemplos": [f"o processo terminou com {process.exitcode}"]}
        return json.loads(result.read_text())

    def run(self, tool: ToolSpec, event: Any, **kwargs: Any) -> Answer:
        return self.start(tool, event, **kwargs).join()

    def logs(self) -> list[Path]:
        return sorted(self.workdir.glob("*.log"))

    def results(self) -> list[Path]:
        return sorted(self.workdir.glob("*.result.json"))

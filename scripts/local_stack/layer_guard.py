"""The unit test layer's guard: starting or using the local stack is refused there.

``tests/conftest.py`` sets ``CADENCIA_LOCAL_STACK_FORBIDDEN`` to a report file for every
test without the ``stack`` marker. Starting the stack or PostgreSQL, or using a running
stack (finding none is fine), then appends to that file and raises. The file, not the exception, is what fails the test:
it also catches a test that swallows the error or starts the stack in a child process
(which inherits the environment), so the layers cannot rot silently.
"""

from __future__ import annotations

import os

FORBIDDEN_ENV = "CADENCIA_LOCAL_STACK_FORBIDDEN"


def refuse_when_forbidden(what: str) -> None:
    report = os.environ.get(FORBIDDEN_ENV)
    if not report:
        return
    with open(report, "a", encoding="utf-8") as out:
        out.write(f"{what} (pid {os.getpid()})\n")
    raise RuntimeError(f"{what}: the local stack is forbidden in this test layer ({FORBIDDEN_ENV} is set); "
                       "mark the test `stack` or request the local_stack fixture")

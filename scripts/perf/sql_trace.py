"""SQL statements and round trips, read from libpq's own protocol trace.

psycopg exposes libpq's ``PQtrace`` (``PGconn.trace``): every protocol message
the client sends (F) and receives (B) is written to a file. A round trip is one
client request answered by the server's ``ReadyForQuery`` (psycopg sends
Parse/Bind/Describe/Execute/Sync of one statement together, and ``BEGIN`` /
``COMMIT`` as simple queries of their own); a statement is one simple ``Query``
or one extended-protocol ``Execute``. Counting the wire, not our own calls, means
a ``BEGIN`` the driver adds implicitly is counted too.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg import pq

_MESSAGE = re.compile(r"^(?:\S+\t)?([FB])\t\d+\t(\w+)(.*)$")


@dataclass
class SqlCount:
    statements: int = 0
    round_trips: int = 0
    texts: list[str] = field(default_factory=list)

    def add(self, other: SqlCount) -> None:
        self.statements += other.statements
        self.round_trips += other.round_trips
        self.texts += other.texts


def parse_trace(lines: Iterable[str]) -> SqlCount:
    count = SqlCount()
    for line in lines:
        found = _MESSAGE.match(line.rstrip("\n"))
        if not found:
            continue
        direction, message, rest = found.groups()
        if direction == "B" and message == "ReadyForQuery":
            count.round_trips += 1
        elif direction == "F" and message == "Query":
            count.statements += 1
            count.texts.append(rest.strip().strip('"')[:60])
        elif direction == "F" and message == "Execute":
            count.statements += 1
        elif direction == "F" and message == "Parse":
            # F <len> Parse "<name>" "<sql>" <n> ...: keep the statement's first words.
            quoted = re.findall(r'"((?:[^"\\]|\\.)*)"', rest)
            if len(quoted) >= 2:
                count.texts.append(" ".join(quoted[1].split())[:60])
    return count


@contextmanager
def traced(connections: Iterable[psycopg.Connection]) -> Iterator[SqlCount]:
    """Count what ``connections`` send while the block runs (they must already be open)."""
    conns = [c for c in connections if not c.closed]
    result = SqlCount()
    files = []
    try:
        for conn in conns:
            fd, path = tempfile.mkstemp(prefix="cadencia-pqtrace-")
            # libpq writes through a FILE* it opens on a duplicate of fd; untrace flushes it.
            conn.pgconn.trace(os.dup(fd))
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            files.append((conn, fd, path))
        yield result
    finally:
        for conn, fd, path in files:
            if not conn.closed:
                conn.pgconn.untrace()
            os.close(fd)
            with open(path, encoding="utf-8", errors="replace") as fh:
                result.add(parse_trace(fh))
            os.unlink(path)

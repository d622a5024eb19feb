"""The parts of committed files that follow from the tool registry (``cadencia_shared.catalog``).

A tool is its package, its registry row and its contract row (docs/architecture.md,
"How to add a tool"). The files below are written by hand, except for regions
marked ``derived:<name> start`` … ``derived:<name> end``, which this module fills:

- ``sql/grants.sql``: the DB users of ``catalog.DB_USERS``, and each user's GRANTs
  taken from its package's ``grants.sql``; ``sql/revoke.sql``: the same users. The
  SQL stays a file (psql, ``scripts/grants.sh``, the RDS Data API custom resource
  and the local stack all run the same bytes).
- ``.importlinter``: the tool packages in the root packages, in the independence
  contract and in the no-model contract (import-linter 2.16 takes no wildcard for
  root packages: each top-level package under functions/ must be named).
- docs/access-matrix.md's matrix, rendered from ``infra/contract.py`` (``infra/access_matrix.py``).

``python -m infra.derived --write`` fills them; ``--check`` exits 1 when one is
stale (``tests/test_derived_files.py`` runs the same comparison). The expected
privileges stay elsewhere on purpose: a user's actual privileges are checked on a
real PostgreSQL against the hand-written contract (``infra/contract.py`` for the
tools, ``tests/test_db_privileges.py``), never against these files.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

from cadencia_shared import catalog

from . import access_matrix
from .sqlsplit import split_statements

ROOT = Path(__file__).resolve().parents[1]
# The ERP tables the agent users may be granted anything on (sql/schema.sql).
AGENT_TABLES = ("clientes", "pedidos", "reembolsos", "canais_whatsapp")
# One column-level GRANT to the file's own user: nothing else belongs in a grants.sql
# (no table-wide GRANT, no GRANT ... WITH GRANT OPTION, no other grantee, no REVOKE).
_GRANT = re.compile(r"\AGRANT (SELECT|INSERT|UPDATE) \([a-z_, \n]+\) ON ([a-z_]+) TO ([a-z_]+)\Z")


class DerivedFileError(ValueError):
    """A package's grants.sql holds something other than its own user's column GRANTs."""


def package_grants(package: str, db_user: str, root: Path = ROOT) -> str:
    """The package's grants.sql, after checking each statement grants columns of an
    agent table to ``db_user`` only."""
    text = (root / catalog.grants_file(package)).read_text()
    # The text goes inside grants.sql's DO $$ … $$ body, where a "$$" ends the body even
    # in what reads as a comment: statements after it would run as the master.
    if "$" in text:
        raise DerivedFileError(f"{catalog.grants_file(package)}: '$' is not allowed (it could end the DO block)")
    for statement in split_statements(text):
        found = _GRANT.match(" ".join(statement.split()).replace("( ", "(").replace(" )", ")"))
        if found is None or found[2] not in AGENT_TABLES or found[3] != db_user:
            raise DerivedFileError(f"{catalog.grants_file(package)}: not a column GRANT to {db_user} on "
                                   f"{', '.join(AGENT_TABLES)}: {statement[:120]!r}")
    return text.strip("\n")


# A derived region: the lines between "<comment> derived:<name> start" and
# "<comment> derived:<name> end" (the markers stay, the text around them is written
# by hand). The same name may mark several regions of one file.
_REGION = re.compile(r"^(?P<indent>[ \t]*)(?P<comment>--|;) derived:(?P<name>[a-z-]+) start[^\n]*\n"
                     r"(?P<body>.*?)"
                     r"^(?P=indent)(?P=comment) derived:(?P=name) end[^\n]*$", re.M | re.S)


def fill_regions(text: str, bodies: dict[str, list[str]]) -> str:
    """``text`` with each derived region holding ``bodies[name]``, one item a line,
    indented like its start marker."""
    names = {found["name"] for found in _REGION.finditer(text)}
    if names != set(bodies):
        raise DerivedFileError(f"derived regions {sorted(names)}, expected {sorted(bodies)}")

    def fill(found: re.Match[str]) -> str:
        lines = "".join(f"{found['indent']}{line}\n" if line else "\n"
                        for item in bodies[found["name"]] for line in item.split("\n"))
        start, end = found.group(0).split("\n", 1)[0], found.group(0).rsplit("\n", 1)[-1]
        return f"{start}\n{lines}{end}"

    return _REGION.sub(fill, text)


_NAME = re.compile(r"\A[a-z_][a-z0-9_]{0,62}\Z")  # written into SQL literals and INI lines as they are


def _names(names: list[str] | tuple[str, ...]) -> list[str]:
    for name in names:
        if not _NAME.match(name):
            raise DerivedFileError(f"not a plain lowercase identifier: {name!r}")
    return list(names)


def _db_users() -> list[str]:
    """The users as a SQL array's items, a few to a line."""
    _names(catalog.DB_USERS)
    return textwrap.wrap(", ".join(f"'{user}'" for user in catalog.DB_USERS), width=96, break_long_words=False,
                         break_on_hyphens=False)


def grants_sql(root: Path = ROOT) -> str:
    grants: list[str] = []
    for user, package in catalog.DB_USER_PACKAGES.items():
        grants += [*([""] if grants else []), package_grants(package, user, root)]  # a blank line between users
    return fill_regions((root / "sql" / "grants.sql").read_text(), {"db-users": _db_users(), "grants": grants})


def revoke_sql(root: Path = ROOT) -> str:
    return fill_regions((root / "sql" / "revoke.sql").read_text(), {"db-users": _db_users()})


def importlinter(root: Path = ROOT) -> str:
    return fill_regions((root / ".importlinter").read_text(), {"tools": _names([t.package for t in catalog.TOOLS.values()])})


def access_matrix_doc(root: Path = ROOT) -> str:
    return access_matrix.with_matrix((root / "docs" / "access-matrix.md").read_text())


def expected(root: Path = ROOT) -> dict[Path, str]:
    """Each file with derived parts and the text it must hold."""
    return {
        root / "sql" / "grants.sql": grants_sql(root),
        root / "sql" / "revoke.sql": revoke_sql(root),
        root / ".importlinter": importlinter(root),
        root / "docs" / "access-matrix.md": access_matrix_doc(root),
    }


def stale(root: Path = ROOT) -> list[Path]:
    return [path for path, text in expected(root).items() if path.read_text() != text]


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        for path, text in expected().items():
            if path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if argv == ["--check"]:
        found = stale()
        for path in found:
            print(f"stale: {path.relative_to(ROOT)} (run: python -m infra.derived --write)", file=sys.stderr)
        return 1 if found else 0
    print("usage: python -m infra.derived --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

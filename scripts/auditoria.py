"""Verify the tamper-evident audit trail.

    scripts/auditoria verificar [--conversa ID] [--local]

Walks each conversation's hash chain (or only ``--conversa``'s) in the audit
table and reports the first broken or missing link: a gap in the sequence (a
deleted record), a previous-hash that does not match (a record removed and the
rest renumbered, or records reordered), or a hash that does not match the
record's content (an edited record), a chain that ends before the head anchored in
the ledger (``cauda_truncada``: its last records deleted) or whose record at the
anchored position is not the anchored one (``ancora_divergente``). Exit 0 when
every chain holds, 1 otherwise.
``--local``: the running local stack; otherwise ``AUDIT_TABLE`` (default
``cadencia-agente-auditoria``) with the caller's own AWS credentials (read access:
Query, and Scan for the full pass; GetItem of ``auditoria-cabeca#`` and ``conversa#``
items and a filtered Scan of the ledger table ``LEDGER_TABLE`` for the two anchors of a
conversation's chain, ``cadencia_shared.audit_anchors``). Threat model:
``cadencia_shared.audit_chain``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Runnable as a file too (``.venv/bin/python scripts/auditoria.py ...``), like provocar_laco.py.
ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT, ROOT / "functions"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

from cadencia_shared.audit_chain import AUDIT_TABLE, NO_CONVERSATION, AuditChain  # noqa: E402
from cadencia_shared.catalog import LEDGER_TABLE  # noqa: E402

from scripts.operator_cli import conversation_argument, dynamodb_client  # noqa: E402


def verify(chain: AuditChain, conversation_id: str | None) -> int:
    # A chain whose records were all deleted has only its anchors left (either kind).
    chains = [conversation_id] if conversation_id else sorted({*chain.chains(), *chain.anchored_chains()})
    broken = 0
    for name in chains:
        checked, problem = chain.verify(name)
        label = "(sem conversa)" if name == NO_CONVERSATION else name
        if problem is None:
            print(f"{label}: íntegra ({checked} registros)")
            continue
        broken += 1
        print(f"{label}: QUEBRADA no registro seq={problem.seq} ({problem.problem}); "
              f"{checked} registros íntegros antes dele")
    print(f"{len(chains)} cadeia(s) verificada(s), {broken} quebrada(s)")
    return 1 if broken else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/auditoria", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("verificar", help="verify the hash chains")
    check.add_argument("--conversa", dest="conversation", metavar="CONVERSA")
    check.add_argument("--local", action="store_true", help="the running local stack")
    args = parser.parse_args(argv)
    conversation_id = conversation_argument(args.conversation)
    # The heads are anchored in the ledger table (LEDGER_TABLE; the local stack uses the default).
    chain = AuditChain(os.environ.get("AUDIT_TABLE", AUDIT_TABLE), dynamodb_client(args.local),
                       anchor_table=os.environ.get("LEDGER_TABLE", LEDGER_TABLE))
    return verify(chain, conversation_id)


if __name__ == "__main__":
    sys.exit(main())

"""Verify the tamper-evident audit trail.

    scripts/auditoria verificar [--conversa ID] [--local]

Walks each conversation's hash chain (or only ``--conversa``'s) in the audit
table and reports the first broken or missing link: a gap in the sequence (a
deleted record), a previous-hash that does not match (a record removed and the
rest renumbered, or records reordered), or a hash that does not match the
record's content (an edited record), a chain that ends before the head anchored in
the ledger (``cauda_truncada``: its last records deleted) or whose record at the
anchored position is not the anchored one (``ancora_divergente``). It also counts the
audit records that sit in the ledger as ``auditoria#`` items, OUTSIDE any chain (a writer
run without ``AUDIT_TABLE``: no hash, no anchor — nothing proves they were not edited or
deleted), and names their conversations.
A chain whose last links lie after every anchor (``sem âncora``: no writer's anchor nor
the turn's fenced commit acknowledged them — a writer killed before anchoring, a turn
still running, or links put by someone who writes the audit table but moves no anchor)
is flagged, never called intact.
Exit status: 0 every chain holds and nothing is flagged; 1 a chain is broken; 4 no chain
is broken but something needs a person's look (links without an anchor, records outside
the chain).
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

from cadencia_shared.audit_anchors import LedgerAnchors  # noqa: E402
from cadencia_shared.audit_chain import AUDIT_TABLE, NO_CONVERSATION, AuditChain  # noqa: E402
from cadencia_shared.catalog import LEDGER_TABLE  # noqa: E402
from scripts.operator_cli import conversation_argument, dynamodb_client  # noqa: E402

EXIT_BROKEN = 1
EXIT_FLAGGED = 4  # nothing broken, something a person must look at


def _label(name: str) -> str:
    return "(sem conversa)" if name == NO_CONVERSATION else name


def verify(chain: AuditChain, conversation_id: str | None, unchained: dict[str, int] | None = None) -> int:
    """``unchained``: the ``auditoria#`` ledger items per conversation (``LedgerAnchors.unchained_records``)."""
    # A chain whose records were all deleted has only its anchors left (either kind).
    chains = [conversation_id] if conversation_id else sorted({*chain.chains(), *chain.anchored_chains()})
    broken = unanchored = 0
    for name in chains:
        report = chain.check(name)
        if report.broken is not None:
            broken += 1
            print(f"{_label(name)}: QUEBRADA no registro seq={report.broken.seq} ({report.broken.problem}); "
                  f"{report.checked} registros íntegros antes dele")
        elif report.unanchored:
            unanchored += 1
            print(f"{_label(name)}: ATENÇÃO — {report.checked} registros encadeados, mas seq="
                  f"{report.unanchored_from}..{report.checked} sem âncora: nenhum escritor os reconheceu (um "
                  "escritor interrompido antes de ancorar, um turno ainda em curso, ou registros postos por "
                  "quem grava na tabela de auditoria sem mover âncora); confira no CloudTrail quem os gravou")
        else:
            print(f"{_label(name)}: íntegra ({report.checked} registros)")
    outside = _report_unchained(unchained or {})
    print(f"{len(chains)} cadeia(s) verificada(s), {broken} quebrada(s), {unanchored} com registros sem âncora")
    return EXIT_BROKEN if broken else EXIT_FLAGGED if outside or unanchored else 0


def _report_unchained(unchained: dict[str, int]) -> int:
    for name, count in sorted(unchained.items()):
        print(f"{_label(name)}: FORA DA CADEIA — {count} registro(s) de auditoria gravado(s) como itens "
              "auditoria# do ledger, sem hash nem âncora (um escritor rodou sem AUDIT_TABLE)")
    total = sum(unchained.values())
    if total:
        print(f"{total} registro(s) de auditoria fora da cadeia")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/auditoria", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("verificar", help="verify the hash chains")
    check.add_argument("--conversa", dest="conversation", metavar="CONVERSA")
    check.add_argument("--local", action="store_true", help="the running local stack")
    args = parser.parse_args(argv)
    conversation_id = conversation_argument(args.conversation)
    # The heads are anchored in the ledger table (LEDGER_TABLE; the local stack uses the default).
    client, ledger_table = dynamodb_client(args.local), os.environ.get("LEDGER_TABLE", LEDGER_TABLE)
    chain = AuditChain(os.environ.get("AUDIT_TABLE", AUDIT_TABLE), client, anchor_table=ledger_table)
    return verify(chain, conversation_id, LedgerAnchors(client, ledger_table).unchained_records(conversation_id))


if __name__ == "__main__":
    sys.exit(main())

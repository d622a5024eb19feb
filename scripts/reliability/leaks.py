"""Secrets and personal data in what the run left behind: every child's stdout and
stderr (all loggers at DEBUG, EMF metrics included), every tool result, and every
item of the ledger table. Each known value is searched verbatim."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from scripts.local_stack.stack import StackState

from .world import World

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LeakReport:
    files: int = 0
    bytes_scanned: int = 0
    ledger_items: int = 0
    personal_values: int = 0
    secrets_found: list[str] = field(default_factory=list)
    personal_found: list[str] = field(default_factory=list)
    # Values the code itself prints as fixed text (the demo customer's phone is the E.164
    # example in atualizar_cadastro's error message): finding them proves nothing.
    skipped_as_code_text: list[str] = field(default_factory=list)


def known_secrets(state: StackState) -> dict[str, str]:
    return {"token do gateway": state.gateway_token,
            **{f"senha de {user}": pw for user, pw in state.postgres.users.items()}}


def _code_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8")
                     for d in ("functions", "orchestrator") for p in (ROOT / d).rglob("*.py"))


def known_personal_data(state: StackState, extra: dict[str, str]) -> dict[str, str]:
    """Every customer's name, CPF, address, phone and e-mail as the ERP holds them,
    and ``extra`` (personal data this run sends in its own events)."""
    with psycopg.connect(state.postgres.admin_conninfo(), autocommit=True) as conn:
        rows = conn.execute("SELECT id, nome, cpf, endereco, telefone, email FROM clientes").fetchall()
    values = {}
    for cid, *fields in rows:
        for name, value in zip(("nome", "cpf", "endereco", "telefone", "email"), fields, strict=True):
            if value and len(value) >= 6:
                values[f"{name} do cliente {cid}"] = value
    return {**values, **extra}


def scan(world: World, places: list[Path], personal: dict[str, str]) -> LeakReport:
    report = LeakReport()
    secrets = known_secrets(world.state)
    code = _code_text()
    report.skipped_as_code_text = sorted(name for name, value in personal.items() if value in code)
    personal = {name: value for name, value in personal.items() if value not in code}
    report.personal_values = len(personal)
    texts: list[tuple[str, str]] = []
    for path in places:
        text = path.read_text(encoding="utf-8", errors="replace")
        report.files += 1
        report.bytes_scanned += len(text)
        texts.append((path.name, text))
    pages = world.ledger.client.get_paginator("scan").paginate(TableName=world.state.ledger_table)
    items = [item for page in pages for item in page["Items"]]
    report.ledger_items = len(items)
    texts.append(("ledger", json.dumps(items, default=str, ensure_ascii=False)))
    for where, text in texts:
        report.secrets_found += [f"{name} em {where}" for name, value in secrets.items() if value in text]
        report.personal_found += [f"{name} em {where}" for name, value in personal.items() if value in text]
    return report

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


@dataclass
class LeakReport:
    files: int = 0
    bytes_scanned: int = 0
    ledger_items: int = 0
    secrets_found: list[str] = field(default_factory=list)
    personal_found: list[str] = field(default_factory=list)


def known_secrets(state: StackState) -> dict[str, str]:
    return {"token do gateway": state.gateway_token,
            **{f"senha de {user}": pw for user, pw in state.postgres.users.items()}}


def known_personal_data(state: StackState) -> dict[str, str]:
    """Every customer's name, CPF, address, phone and e-mail as the ERP holds them."""
    with psycopg.connect(state.postgres.admin_conninfo(), autocommit=True) as conn:
        rows = conn.execute("SELECT id, nome, cpf, endereco, telefone, email FROM clientes").fetchall()
    values = {}
    for cid, *fields in rows:
        for name, value in zip(("nome", "cpf", "endereco", "telefone", "email"), fields, strict=True):
            if value and len(value) >= 6:
                values[f"{name} do cliente {cid}"] = value
    return values


def scan(world: World, places: list[Path], personal: dict[str, str]) -> LeakReport:
    report = LeakReport()
    secrets = known_secrets(world.state)
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

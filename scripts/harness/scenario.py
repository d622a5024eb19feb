"""Scenario files: JSONL, one conversation per line.

    {"conversaId": str, "clienteId": int, "pedidoId": str, "valorPedido": number,
     "mensagens": [str, ...], "roteiro": [[{"ferramenta": name, "entrada": {...}}, ...], ...]?}

``roteiro`` (optional) has one entry per customer message: the tool calls the
scripted model emits, in order, for that message before its text reply.
Without it, the seeded insistent policy decides. A file with any malformed line
is rejected as a whole, each problem with its line number, before anything runs.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from cadencia_shared.catalog import TOOLS
from cadencia_shared.models import ConversationId, CustomerId, OrderId


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ferramenta: str
    entrada: dict[str, Any]

    @model_validator(mode="after")
    def _known_tool(self) -> ScriptedCall:
        if self.ferramenta not in TOOLS:
            raise ValueError(f"ferramenta desconhecida {self.ferramenta!r}; use uma de {sorted(TOOLS)}")
        return self


CustomerText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    conversaId: ConversationId
    clienteId: CustomerId
    pedidoId: OrderId
    valorPedido: Annotated[Decimal, Field(gt=0, max_digits=12, decimal_places=2)]
    mensagens: Annotated[list[CustomerText], Field(min_length=1)]
    roteiro: list[list[ScriptedCall]] | None = None

    @model_validator(mode="after")
    def _one_script_entry_per_message(self) -> Scenario:
        if self.roteiro is not None and len(self.roteiro) != len(self.mensagens):
            raise ValueError(
                f"roteiro tem {len(self.roteiro)} entradas e mensagens tem {len(self.mensagens)}: "
                "é uma entrada (lista de chamadas) por mensagem"
            )
        return self


class ScenarioError(ValueError):
    def __init__(self, path: Path, problems: list[str]) -> None:
        super().__init__(f"{path}: {len(problems)} problem(s)\n" + "\n".join(problems))
        self.problems = problems


def load(path: Path) -> list[Scenario]:
    problems: list[str] = []
    scenarios: list[Scenario] = []
    seen_conversations: dict[str, int] = {}
    order_owner: dict[str, tuple[int, int, Decimal]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ScenarioError(path, [f"cannot read the file: {err.strerror}"]) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(f"line {number}: not valid JSON ({err.msg} at column {err.colno})")
            continue
        if not isinstance(raw, dict):
            problems.append(f"line {number}: expected a JSON object, got {type(raw).__name__}")
            continue
        try:
            scenario = Scenario.model_validate(raw)
        except ValidationError as err:
            for e in err.errors(include_url=False, include_input=False):
                where = ".".join(str(p) for p in e["loc"]) or "(line)"
                problems.append(f"line {number}: {where}: {e['msg']}")
            continue
        if scenario.conversaId in seen_conversations:
            problems.append(f"line {number}: conversaId {scenario.conversaId!r} repeats line "
                            f"{seen_conversations[scenario.conversaId]}")
            continue
        owner = order_owner.get(scenario.pedidoId)
        if owner and owner[0] != scenario.clienteId:
            problems.append(f"line {number}: pedidoId {scenario.pedidoId!r} belongs to clienteId {owner[0]} "
                            f"on line {owner[1]}")
            continue
        if owner and owner[2] != scenario.valorPedido:
            problems.append(f"line {number}: pedidoId {scenario.pedidoId!r} has valorPedido {owner[2]} "
                            f"on line {owner[1]}")
            continue
        seen_conversations[scenario.conversaId] = number
        order_owner.setdefault(scenario.pedidoId, (scenario.clienteId, number, scenario.valorPedido))
        scenarios.append(scenario)
    if not problems and not scenarios:
        problems.append("no conversations in the file")
    if problems:
        raise ScenarioError(path, problems)
    return scenarios

"""Attempt records (the harness's output) and the per-architecture summary.

Output: a JSON array of attempt records, one per tool call the model asked for,
so Lab 87's ``jq '.[] | select(.tentativaNumero > 1) | .resultado'`` works as is:

    evento, timestamp, arquitetura, conversaId, pedidoId, ferramenta,
    tentativaNumero, resultado, chaveIdempotencia (+ detalhe when there is one)

``resultado`` is one of Lab 87's ``executado``, ``bloqueado_por_idempotencia``,
``bloqueado_por_teto``, or one of the documented others (``em_processamento``,
``resultado_desconhecido``, ``recusado_pelo_gateway``, ``recusado_pela_ferramenta``,
``erro_da_ferramenta``, ``pendente``). Real debits are never read from here: they
are counted at the gateway server and written to the summary beside the file.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

REFUND_TOOL = "emitir_reembolso"
RECORD_FIELDS = ("evento", "timestamp", "arquitetura", "conversaId", "pedidoId", "ferramenta", "tentativaNumero",
                 "resultado", "chaveIdempotencia")


@dataclass
class ConversationOutcome:
    conversaId: str
    pedidoId: str
    chamadasReembolso: int = 0
    debitosReais: int = 0  # counted at the gateway
    interrompidaNoTeto: bool = False
    cortadaPelaPlataforma: bool = False
    encerramento: str = ""  # how the conversation's last turn ended


@dataclass
class Summary:
    architecture: str
    model: str
    conversations: list[ConversationOutcome] = field(default_factory=list)
    blocks: dict[str, int] = field(default_factory=dict)

    @property
    def calls(self) -> list[int]:
        return [c.chamadasReembolso for c in self.conversations]

    def figures(self) -> dict[str, Any]:
        calls = self.calls or [0]
        debits = sum(c.debitosReais for c in self.conversations)
        return {
            "conversas": len(self.conversations),
            "media_chamadas_reembolso": round(statistics.mean(calls), 2),
            "pior_caso_chamadas_reembolso": max(calls),
            "debitos_reais": debits,
            "debitos_reais_por_conversa": round(debits / max(len(self.conversations), 1), 2),
            "debitos_duplicados": sum(max(0, c.debitosReais - 1) for c in self.conversations),
            "interrompidas_no_teto": sum(c.interrompidaNoTeto for c in self.conversations),
            "cortadas_pela_plataforma": sum(c.cortadaPelaPlataforma for c in self.conversations),
            "bloqueios": dict(self.blocks),
        }

    def to_json(self) -> dict[str, Any]:
        return {"arquitetura": self.architecture, "modelo": self.model, "figuras": self.figures(),
                "conversas": [asdict(c) for c in self.conversations]}


def summarize(architecture: str, model: str, records: list[dict[str, Any]], debits: list[dict[str, Any]],
              endings: dict[str, str], scenarios: list[Any], platform_cuts: set[str]) -> Summary:
    """Join the attempt records with the debits the gateway really made."""
    by_conversation_debits = Counter(d["idempotencyKey"].split("#", 1)[0] for d in debits)
    summary = Summary(architecture=architecture, model=model)
    blocks: Counter[str] = Counter()
    for sc in scenarios:
        mine = [r for r in records if r["conversaId"] == sc.conversaId and r["ferramenta"] == REFUND_TOOL]
        summary.conversations.append(ConversationOutcome(
            conversaId=sc.conversaId,
            pedidoId=sc.pedidoId,
            chamadasReembolso=len(mine),
            debitosReais=by_conversation_debits.get(sc.conversaId, 0),
            interrompidaNoTeto=any(r["resultado"] == "bloqueado_por_teto" for r in mine),
            cortadaPelaPlataforma=sc.conversaId in platform_cuts,
            encerramento=endings.get(sc.conversaId, ""),
        ))
        blocks.update(r["resultado"] for r in mine if r["resultado"] != "executado")
    summary.blocks = dict(sorted(blocks.items()))
    return summary


def record(**fields: Any) -> dict[str, Any]:
    out = {k: fields.get(k) for k in RECORD_FIELDS}
    if fields.get("detalhe"):
        out["detalhe"] = fields["detalhe"]
    return out

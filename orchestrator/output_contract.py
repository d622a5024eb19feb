"""The output contract: the model's final answer is a structured object the code
checks before a customer reads a word of it (DESIGN invariants 11 and 14).

Mechanism: a final-answer tool, ``responder_cliente``, with ``tool_choice`` ``any``
(the model must call a tool on every response, so it can only finish by calling
this one) and ``strict`` input schema when the other tools are strict. Chosen over
the pinned SDK's structured output (anthropic 2.14's ``output_config.format``)
because a rejected answer goes back as an ``is_error`` ``tool_result`` bound to the
call's id; free text never ends a turn; it is the same wire shape on the
first-party API and on Bedrock.

The code, not the model, says what happened to money, to the record and to an order:
- ``declaracoes`` carries one typed statement per fact (``statements``: a refund
  executed, awaiting approval, declined, unconfirmed, not made and why; a record
  field updated; an order's status; how refunds work). Each is checked against the
  ledger and this conversation's tool results; the customer reads the sentences the
  code renders from them (``money_sentences``), after the model's ``texto``;
- ``texto`` may not speak about money, the record or an order's status
  (``money_detector``, built for recall): such a text is refused with an
  ``is_error`` telling the model to use a statement instead;
- after K refused answers the fallback is rendered from the ledger alone, so it
  is true.

The schema lives here once (``SCHEMA``, JSON Schema 2020-12, checked by
``answer_shape``, a small interpreter of the keywords it uses, with ``jsonschema``'s
verdicts, compared by a test; ``jsonschema`` itself is not imported); the model is shown it without the keywords the
Messages API does not enforce in strict mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cadencia_shared.approval_arguments import canonical_arguments
from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.catalog import ATUALIZAR_CADASTRO, EMITIR_REEMBOLSO
from cadencia_shared.ledger import Ledger, RefundClaim, refund_idempotency_key
from cadencia_shared.models import ORDER_ID_PATTERN, json_schema_pattern
from cadencia_shared.outcomes import Outcome

from . import answer_shape, money_detector
from . import money_sentences as ms
from .statements import HOW_REFUNDS_WORK, Evidence, Problem, Verifier
from .tools import canonical_input, tool_version

REPLY_TOOL = "responder_cliente"
# Every response must call a tool; the only way to finish is ``responder_cliente``.
TOOL_CHOICE: dict[str, Any] = {"type": "any"}
DEFAULT_MAX_ATTEMPTS = 3  # answers checked per turn before the fallback (OUTPUT_CONTRACT_ATTEMPTS)

# The shape check matches ``pattern`` with Python's ``re.search`` (as jsonschema does), where ``$`` also
# matches before a final newline ("4821\n" would pass ``^…$``): the schema keeps
# the project's ``\A…\Z`` spelling, and the model is shown the ECMA-262 one.
_ORDER = {"type": "string", "pattern": ORDER_ID_PATTERN}
NOT_MADE_REASONS = tuple(ms.NOT_MADE_WHY)
_ORDER_ID = re.compile(ORDER_ID_PATTERN)
MAX_NAMED_ORDERS = 5  # ledger reads the fallback may spend on orders the model named


def _statement(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["tipo", *fields],
            "properties": {"tipo": {"const": kind}, **fields}}


SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["texto", "precisaDePessoa", "declaracoes"],
    "properties": {
        "texto": {"type": "string", "minLength": 1, "maxLength": 1500,
                  "description": ("A mensagem ao cliente, em português do Brasil, SEM falar de dinheiro, valores, "
                                  "números de pedido, cadastro ou situação de pedidos: isso vai em 'declaracoes'.")},
        "precisaDePessoa": {"type": "boolean",
                            "description": "true se um atendente humano precisa agir nesta conversa."},
        "declaracoes": {
            "type": "array", "maxItems": 10, "uniqueItems": True,
            "description": ("Uma declaração tipada por fato sobre reembolso, cadastro ou status de pedido; o código "
                            "confere cada uma no registro e escreve a frase que o cliente lê."),
            "items": {"anyOf": [
                _statement(ms.REFUND_EXECUTED, pedidoId=_ORDER,
                           valor={"type": "number", "exclusiveMinimum": 0, "maximum": 100000}),
                _statement(ms.REFUND_AWAITING_APPROVAL, pedidoId=_ORDER),
                _statement(ms.REFUND_DECLINED, pedidoId=_ORDER),
                _statement(ms.REFUND_UNCONFIRMED, pedidoId=_ORDER),
                _statement(ms.REFUND_NOT_MADE, pedidoId=_ORDER, motivo={"enum": list(NOT_MADE_REASONS)}),
                _statement(ms.PROFILE_UPDATED, campo={"enum": list(ms.FIELDS)}),
                _statement(ms.ORDER_STATUS, pedidoId=_ORDER),
                _statement(HOW_REFUNDS_WORK),
            ]},
        },
    },
}
# A constant: tests/test_output_contract.py checks it against the metaschema, and
# tests/test_answer_shape.py that ``answer_shape`` knows every keyword it uses.

# What the Messages API accepts in a strict tool's schema; the rest is checked here.
_MODEL_KEYWORDS = {"type", "properties", "required", "additionalProperties", "pattern", "description", "items",
                   "anyOf", "const", "enum"}


def _for_the_model(node: Any) -> Any:
    if isinstance(node, list):
        return [_for_the_model(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _MODEL_KEYWORDS:
            continue
        if key == "properties":
            out[key] = {name: _for_the_model(sub) for name, sub in value.items()}
        elif key == "pattern":
            out[key] = json_schema_pattern(value)
        else:
            out[key] = _for_the_model(value) if key in ("items", "anyOf") else value
    return out


def tool_definition(*, strict: bool) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": REPLY_TOOL,
        "description": ("Entrega a resposta final ao cliente. Use SEMPRE para terminar. O 'texto' não fala de "
                        "dinheiro, reembolso, valores, pedidos, cadastro nem status: cada fato desses vai em "
                        "'declaracoes', que o código confere no registro e escreve para o cliente."),
        "input_schema": _for_the_model(SCHEMA),
    }
    if strict:
        tool["strict"] = True
    return tool


# --- verdicts -----------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    code: str  # stable, audited and counted
    message: str  # for the model (pt-BR, never shown to the customer)


@dataclass(frozen=True)
class FinalAnswer:
    text: str  # the model's own words (free of money, record and status statements)
    needs_person: bool
    statements: tuple[dict[str, Any], ...]
    rendered: tuple[ms.Rendered, ...] = ()

    @property
    def delivered(self) -> str:
        """What the customer reads: the model's text, then the code's sentences."""
        return ms.join(self.text, list(self.rendered))


class LedgerEvidence:
    """The ledger as evidence, strongly consistent reads by key (the orchestrator's
    role may read no ledger index): the refund claim by its idempotency key
    (conversation + order, so another conversation's claim is never found); the
    attempts by the ``CHAMADA_DE_FERRAMENTA`` links of (conversation, subject,
    tool) numbered within the ceiling — one Query of the conversation's audit chain.
    Those links, not the tool's own ``CADASTRO_ATUALIZADO``: the tool appends that
    one inside its database transaction, BEFORE the commit, while the orchestrator
    writes the call link only after the tool answered, i.e. after the commit. A
    pending approval by its id (conversation, tool, version, arguments' digest)."""

    def __init__(self, ledger: Ledger, *, ceiling: int, release: str = "local") -> None:
        self.ledger = ledger
        self.ceiling = ceiling
        self.release = release

    def refund_claim(self, conversation_id: str, order_id: str) -> RefundClaim | None:
        return self.ledger.get_claim(refund_idempotency_key(conversation_id, order_id))

    def profile_updated(self, conversation_id: str, customer_id: int) -> bool:
        results = self.ledger.attempt_results(conversation_id=conversation_id, subject=f"cliente-{customer_id}",
                                              tool=ATUALIZAR_CADASTRO.name, limit=self.ceiling)
        return Outcome.EXECUTED.value in results

    def refund_results(self, conversation_id: str, order_id: str) -> list[str]:
        return self.ledger.attempt_results(conversation_id=conversation_id, subject=order_id,
                                           tool=EMITIR_REEMBOLSO.name, limit=self.ceiling)

    def pending_approval_amount(self, conversation_id: str, arguments: dict[str, Any]) -> Decimal | None:
        try:
            canonical = canonical_input(EMITIR_REEMBOLSO.name, arguments)
        except ValueError:  # pydantic's ValidationError: arguments the tool would refuse asked nobody
            return None
        record = ApprovalStore(self.ledger).find(
            conversation_id=conversation_id, tool=EMITIR_REEMBOLSO.name,
            version=tool_version(EMITIR_REEMBOLSO.name, self.release),
            arguments_sha256=canonical_arguments(canonical)[1])
        if record is None or record.status is not ApprovalStatus.PENDING or not record.intact \
                or record.expired(self.ledger.now_ms()):
            return None
        return record.amount


def review(answer: Any, *, conversation_id: str, customer_id: int, evidence: Evidence,
           transcript: list[dict[str, Any]] | None = None) -> FinalAnswer | list[Violation]:
    """The final answer if every check passes, else every violation found."""
    shape = [Violation("esquema", f"{_where(err)}: {err.message}") for err in answer_shape.errors(SCHEMA, answer)]
    if shape:
        return shape[:10]
    verifier = Verifier(conversation_id, customer_id, evidence, list(transcript or []))
    problems: list[Violation] = [Violation(code, _SPOKEN[code])
                                 for code in sorted(money_detector.findings(answer["texto"]))]
    rendered = []
    for statement in answer["declaracoes"]:
        verdict = verifier.check(statement)
        if isinstance(verdict, Problem):
            problems.append(Violation(verdict.code, verdict.message))
        else:
            rendered.append(verdict)
    if problems:
        return problems
    return FinalAnswer(answer["texto"], answer["precisaDePessoa"], tuple(answer["declaracoes"]), tuple(rendered))


_SPOKEN = {
    money_detector.MONEY: ("o texto fala de dinheiro, reembolso, valores, números ou confirma uma ação; tire isso do "
                           "texto e use uma declaração tipada em 'declaracoes'"),
    money_detector.PROFILE: "o texto fala de alteração de cadastro; use a declaração cadastro_atualizado",
    money_detector.STATUS: "o texto fala da situação de um pedido; use a declaração status_do_pedido",
}


def _where(err: answer_shape.ShapeError) -> str:
    return "/".join(str(p) for p in err.path) or "(resposta)"


@dataclass
class ReplyCheck:
    """One turn's checks of final answers: how many were judged, against what."""

    conversation_id: str
    customer_id: int
    evidence: Evidence
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    attempts: int = 0
    # The conversation so far (the loop sets it before each model answer is judged):
    # where the tool results a statement is checked against are read.
    transcript: list[dict[str, Any]] = field(default_factory=list)

    # Orders the refused answers named (statements, or order-like tokens of the text):
    # the fallback reads each one's claim by key and says what the ledger shows.
    named: set[str] = field(default_factory=set)

    def judge(self, answer: Any) -> FinalAnswer | list[Violation]:
        self.attempts += 1
        self.note_orders(answer)
        return review(answer, conversation_id=self.conversation_id, customer_id=self.customer_id,
                      evidence=self.evidence, transcript=self.transcript)

    def reject(self, violation: Violation) -> list[Violation]:
        """A response that is not a lone final answer: it counts as an attempt too."""
        self.attempts += 1
        return [violation]

    @property
    def exhausted(self) -> bool:
        return self.attempts >= self.max_attempts

    def fallback(self) -> str:
        """Rendered from the ledger and this conversation's tool results alone."""
        verifier = Verifier(self.conversation_id, self.customer_id, self.evidence, self.transcript)
        return ms.fallback(verifier.ledger_facts(frozenset(self.named)))

    def note_orders(self, answer: Any) -> None:
        if not isinstance(answer, dict):
            return
        found = [s.get("pedidoId") for s in answer.get("declaracoes") or [] if isinstance(s, dict)]
        if isinstance(answer.get("texto"), str):
            found += re.findall(r"(?<![\w.,])[A-Za-z]{0,4}-?\d{3,12}(?![\w.,]\d)", answer["texto"])
        for order in found:
            if len(self.named) < MAX_NAMED_ORDERS and isinstance(order, str) and _ORDER_ID.match(order):
                self.named.add(order)


NOT_STRUCTURED = Violation("sem_resposta_estruturada",
                           f"a resposta ao cliente só é entregue pela ferramenta {REPLY_TOOL}")
NOT_ALONE = Violation("resposta_com_outras_chamadas",
                      f"{REPLY_TOOL} deve ser a única chamada da resposta; "
                      "nenhuma chamada desta resposta foi executada")


def feedback(violations: list[Violation]) -> str:
    """The ``is_error`` body the model reads: what to fix, never the customer's data."""
    lines = "; ".join(f"[{v.code}] {v.message}" for v in violations)
    return (f"Resposta NÃO entregue ao cliente: {lines}. Corrija e chame {REPLY_TOOL} de novo: o 'texto' sem "
            "dinheiro, valores, pedidos, cadastro ou status, e cada fato desses como declaração em 'declaracoes' "
            "(só o que uma ferramenta confirmou nesta conversa; o código escreve a frase para o cliente).")

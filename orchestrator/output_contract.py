"""The output contract: the model's final answer is a structured object the code
checks before a customer reads a word of it (DESIGN invariant 11).

Mechanism: a final-answer tool, ``responder_cliente``, with ``tool_choice`` ``any``
(the model must call a tool on every response, so it can only finish by calling
this one) and ``strict`` input schema when the other tools are strict. Chosen over
the pinned SDK's structured output (anthropic 2.14's ``output_config.format``)
because:
- a rejected answer goes back as an ``is_error`` ``tool_result`` bound to the
  call's id — the protocol the API defines for "this call failed, here is why";
  a rejected JSON text has no such slot (it needs an invented user turn);
- free text never ends a turn: with ``tool_choice: any`` there is no plain-text
  answer to leak, and one that comes anyway (a proxy or model not honouring it)
  is a violation, not a reply;
- it is the same wire shape on the first-party API and on Bedrock.

The schema lives here once (``SCHEMA``, JSON Schema 2020-12, checked with
``jsonschema``'s full validator). The model is shown it without the keywords the
Messages API does not enforce in strict mode (lengths, item counts): those are
enforced here, as are the checks no schema can express:

- every claimed action is checked against the ledger: a refund claim
  (``reembolso_emitido``) needs this conversation's refund claim for that order
  in status ``executado`` with exactly that amount; a profile update
  (``cadastro_atualizado``) needs an executed ``atualizar_cadastro`` attempt in
  this conversation;
- a narrative claim in the text ("reembolso ... feito/processado/estornado",
  "cadastro ... atualizado") with no matching verified action is a violation, and
  an amount in a refund-done sentence must be a verified refund's amount.

The narrative check is a heuristic (regular expressions over normalized text):
it errs toward rejecting, whose cost is one more model round or the fallback —
never a false sentence to the customer.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from jsonschema import Draft202012Validator

from cadencia_shared.catalog import ATUALIZAR_CADASTRO
from cadencia_shared.ledger import ClaimStatus, Ledger, RefundClaim, refund_idempotency_key
from cadencia_shared.models import ORDER_ID_PATTERN, json_schema_pattern
from cadencia_shared.outcomes import Outcome

REPLY_TOOL = "responder_cliente"
# Every response must call a tool; the only way to finish is ``responder_cliente``.
TOOL_CHOICE: dict[str, Any] = {"type": "any"}
DEFAULT_MAX_ATTEMPTS = 3  # answers checked per turn before the fallback (OUTPUT_CONTRACT_ATTEMPTS)

REFUND_CLAIM, PROFILE_CLAIM = "reembolso_emitido", "cadastro_atualizado"
# jsonschema matches ``pattern`` with Python's ``re.search``, where ``$`` also
# matches before a final newline ("4821\n" would pass ``^…$``): the schema keeps
# the project's ``\A…\Z`` spelling, and the model is shown the ECMA-262 one.
_ORDER = {"type": "string", "pattern": ORDER_ID_PATTERN}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["texto", "precisaDePessoa", "pedidos", "acoes"],
    "properties": {
        "texto": {"type": "string", "minLength": 1, "maxLength": 1500,
                  "description": "A mensagem ao cliente, em português do Brasil."},
        "precisaDePessoa": {"type": "boolean",
                            "description": "true se um atendente humano precisa agir nesta conversa."},
        "pedidos": {"type": "array", "maxItems": 10, "uniqueItems": True, "items": _ORDER,
                    "description": "Os pedidos mencionados na mensagem."},
        "acoes": {
            "type": "array", "maxItems": 10, "uniqueItems": True,
            "description": "As ações que a mensagem diz que foram feitas (só as confirmadas por ferramentas).",
            "items": {"anyOf": [
                {"type": "object", "additionalProperties": False, "required": ["tipo", "pedidoId", "valor"],
                 "properties": {"tipo": {"const": REFUND_CLAIM}, "pedidoId": _ORDER,
                                "valor": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000}}},
                {"type": "object", "additionalProperties": False, "required": ["tipo"],
                 "properties": {"tipo": {"const": PROFILE_CLAIM}}},
            ]},
        },
    },
}
# A constant: tests/test_output_contract.py checks it against the metaschema once,
# not every cold start (~4 ms of the import).
_VALIDATOR = Draft202012Validator(SCHEMA)

# What the Messages API accepts in a strict tool's schema; the rest is checked here.
_MODEL_KEYWORDS = {"type", "properties", "required", "additionalProperties", "pattern", "description", "items",
                   "anyOf", "const", "enum"}


def _for_the_model(node: Any) -> Any:
    if isinstance(node, list):
        return [_for_the_model(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
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
        "description": ("Entrega a resposta final ao cliente. Use SEMPRE para terminar. Em 'acoes' declare "
                        "só o que uma ferramenta confirmou nesta conversa; o código confere tudo antes de enviar."),
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
    text: str
    needs_person: bool
    orders: tuple[str, ...]
    claims: tuple[dict[str, Any], ...]


class Evidence(Protocol):
    """What the ledger shows was done in a conversation."""

    def refund_claim(self, conversation_id: str, order_id: str) -> RefundClaim | None: ...

    def profile_updated(self, conversation_id: str, customer_id: int) -> bool: ...


class LedgerEvidence:
    """The ledger as evidence, strongly consistent reads by key (the orchestrator's
    role may read no ledger index): the refund claim by its idempotency key
    (conversation + order, so another conversation's claim is never found); the
    profile update by the ``CHAMADA_DE_FERRAMENTA`` links of (conversation, the
    customer's record, ``atualizar_cadastro``) numbered within the ceiling — one
    Query of the conversation's audit chain. Those links, not the tool's own
    ``CADASTRO_ATUALIZADO``: the tool appends that one inside its database
    transaction, BEFORE the commit (a failed commit leaves it behind), while the
    orchestrator writes the call link only after the tool answered ``atualizado``,
    i.e. after the commit."""

    def __init__(self, ledger: Ledger, *, ceiling: int) -> None:
        self.ledger = ledger
        self.ceiling = ceiling

    def refund_claim(self, conversation_id: str, order_id: str) -> RefundClaim | None:
        return self.ledger.get_claim(refund_idempotency_key(conversation_id, order_id))

    def profile_updated(self, conversation_id: str, customer_id: int) -> bool:
        results = self.ledger.attempt_results(conversation_id=conversation_id, subject=f"cliente-{customer_id}",
                                              tool=ATUALIZAR_CADASTRO.name, limit=self.ceiling)
        return Outcome.EXECUTED.value in results


def review(answer: Any, *, conversation_id: str, customer_id: int,
           evidence: Evidence) -> FinalAnswer | list[Violation]:
    """The final answer if every check passes, else every violation found."""
    shape = [Violation("esquema", f"{_where(err)}: {err.message}") for err in _VALIDATOR.iter_errors(answer)]
    if shape:
        return shape[:10]
    final = FinalAnswer(answer["texto"], answer["precisaDePessoa"], tuple(answer["pedidos"]),
                        tuple(answer["acoes"]))
    problems = [*_unlisted_orders(final), *_unverified(final, conversation_id, customer_id, evidence),
                *narrative_violations(final)]
    return problems or final


def _where(err: Any) -> str:
    return "/".join(str(p) for p in err.absolute_path) or "(resposta)"


def _unlisted_orders(final: FinalAnswer) -> list[Violation]:
    return [Violation("pedido_nao_listado", f"o pedido {c['pedidoId']} da ação não está em 'pedidos'")
            for c in final.claims if c["tipo"] == REFUND_CLAIM and c["pedidoId"] not in final.orders]


def _unverified(final: FinalAnswer, conversation_id: str, customer_id: int,
                evidence: Evidence) -> list[Violation]:
    out = []
    for claim in final.claims:
        if claim["tipo"] == PROFILE_CLAIM:
            if not evidence.profile_updated(conversation_id, customer_id):
                out.append(Violation("cadastro_nao_atualizado",
                                     "nenhuma atualização de cadastro foi executada nesta conversa"))
            continue
        out.extend(_refund_problems(claim, evidence.refund_claim(conversation_id, claim["pedidoId"]),
                                    conversation_id))
    return out


def _refund_problems(claim: dict[str, Any], found: RefundClaim | None, conversation_id: str) -> list[Violation]:
    order = claim["pedidoId"]
    if found is None or found.conversation_id != conversation_id:
        return [Violation("reembolso_nao_executado", f"nenhum reembolso do pedido {order} foi emitido nesta conversa")]
    if found.status is not ClaimStatus.EXECUTED:
        return [Violation("reembolso_nao_executado",
                          f"o reembolso do pedido {order} não foi executado (situação: {found.status.value})")]
    if _cents(claim["valor"]) != found.amount:
        return [Violation("valor_divergente",
                          f"o reembolso executado do pedido {order} foi de R$ {found.amount}, não R$ {claim['valor']}")]
    return []


def _cents(value: Any) -> Decimal | None:
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount == amount.quantize(Decimal("0.01")) else None


# --- narrative claims ---------------------------------------------------------------

# A claim is a domain noun within WINDOW words of a "done" word that no negation
# precedes (within 3 words) — across sentence ends, so "Seu reembolso. Foi feito!"
# is one claim. Refund and profile "done" words are separate lists, so a true
# "cadastro atualizado" beside "o reembolso está em análise" is not a refund claim.
WINDOW = 8
_REFUND_NOUN = re.compile(r"\A(reembols|estorn|devolu|devolv|ressarc|restitu|refund|credito)")
_PROFILE_NOUN = re.compile(r"\A(cadastr|endereco|telefone|celular|e-?mail|cep\b)")
_PAST = r"(?:ad[oa]s?|id[oa]s?|ei|i|amos|emos|imos|ou|eu|iu)"
_REFUND_DONE = re.compile(
    r"\A(?:(?:realiz|process|emit|conclu|efetu|aprov|estorn|devolv|credit|deposit|envi|solicit|registr|liber|"
    rf"confirm|reembols|restitu|ressarc|pag|execut|efetiv|finaliz|conced|autoriz){_PAST}|"
    r"feit[oa]s?|fiz|fizemos|fez|pront[oa]s?|pago|caiu|caminho|recebeu|"
    r"done|processed|issued|completed|refunded|sent)\Z")
_PROFILE_DONE = re.compile(
    r"\A(?:(?:atualiz|alter|mud|troc|modific|salv|corrig|registr|conclu|confirm|realiz|efetu|efetiv|execut|"
    rf"finaliz){_PAST}|"
    r"feit[oa]s?|fiz|fizemos|fez|pront[oa]s?|done|updated|changed)\Z")
# Not "no" (Portuguese "in the": "pedido no 4822 emitido") nor "sem" ("reembolso sem
# juros creditado"): each would hide a claim.
_NEGATION = frozenset({"nao", "nenhum", "nenhuma", "nunca", "jamais", "not", "never"})
# "precisa ser aprovado" states a requirement, not a done refund.
_REQUIREMENT = frozenset({"precisa", "precisam", "precisara", "deve", "devem"})
# Amounts in any currency spelling (a bare "50,00" too), so a wrong one is compared,
# not skipped; a clause end (punctuation, kept as a token) bounds a negation.
_TOKEN = re.compile(r"(?:us|r)?\$\s*\d[\d.,]*|\d[\d.,]*\s*(?:reais|brl)\b|\d[\d.]*,\d{2}(?!\d)|[\w-]+|[.!?;:,\n]")
_CLAUSE_END = frozenset(".!?;:,\n")
_ORDER_MENTION = re.compile(r"\Apedidos?\Z")
_ORDER_CONNECTORS = frozenset({"e", "no", "nos", "n", "numero", "numeros", "and"})


def normalized(text: str) -> str:
    """Lowercase, accents and invisible characters (format, control) removed, so
    "reembolso", "REEMBOLSO" and "reem\u200bbolso" read the same."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = (ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Cf", "Cc") or ch == "\n")
    return re.sub(r"[ \t]+", " ", "".join(kept).lower())


def _not_a_done_claim(tokens: list[str], i: int) -> bool:
    """A negation among the 3 words before, in the same clause ("Não, reembolso
    feito" is a claim), or a requirement ("precisa ser aprovado")."""
    before: list[str] = []
    for token in reversed(tokens[max(0, i - 3):i]):
        if token in _CLAUSE_END:
            break
        before.append(token)
    required = before[:1] == ["ser"] and before[1:2] != [] and before[1] in _REQUIREMENT
    return required or any(w in _NEGATION for w in before)


def _claims_done(tokens: list[str], noun: re.Pattern[str], done: re.Pattern[str]) -> bool:
    # Positions count clause ends too; hyphens are dropped ("re-embolso" is "reembolso").
    words = [w.replace("-", "") for w in tokens]
    nouns = [i for i, w in enumerate(words) if noun.match(w)]
    for i, word in enumerate(words):
        if not done.match(word) or _not_a_done_claim(tokens, i):
            continue
        if any(abs(i - n) <= WINDOW for n in nouns):
            return True
    return False


def _is_amount(token: str) -> bool:
    return "$" in token or token.endswith(("reais", "brl")) or re.fullmatch(r"\d[\d.]*,\d{2}", token) is not None


def _orders_after(following: list[str]) -> list[str]:
    """"pedido 4821", "pedido nº 4821", "pedidos 4821 e 4822": the ids up to the first
    other word or clause end ("seu pedido. Qualquer coisa" names none)."""
    out = []
    for token in following:
        if any(c.isdigit() for c in token) and not _is_amount(token):
            out.append(token)
        elif token not in _ORDER_CONNECTORS:
            break
    return out


def _amount(token: str) -> Decimal | None:
    # "us$"/"$" keep their letters, so another currency never equals a refund's amount.
    raw = re.sub(r"\Ar\$|reais\Z|brl\Z|\s", "", token).rstrip(".,")
    if "," in raw:
        raw = raw.replace(".", "").replace(",", ".")
    elif not re.search(r"\.\d{2}\Z", raw):
        raw = raw.replace(".", "")
    try:
        return Decimal(raw)
    except InvalidOperation:
        return None


def _refund_mismatches(words: list[str], final: FinalAnswer) -> list[Violation]:
    """With a refund claimed in the text: every amount must be a declared refund's,
    every order named ("pedido X") a declared refund's order."""
    refunds = [c for c in final.claims if c["tipo"] == REFUND_CLAIM]
    amounts = {_cents(c["valor"]) for c in refunds}
    orders = {c["pedidoId"].lower() for c in refunds}
    out = []
    if any(_amount(w) not in amounts for w in words if _is_amount(w)):
        out.append(Violation("valor_no_texto_divergente",
                             "um valor no texto não é o de um reembolso executado declarado em 'acoes'"))
    # "pedido 4821", "pedido nº 4821": the first of the next two words with a digit
    # (punctuation is gone, so "seu pedido. Qualquer coisa" names no order).
    named = {n for i, w in enumerate(words) if _ORDER_MENTION.match(w) for n in _orders_after(words[i + 1:i + 6])}
    if named - orders:
        out.append(Violation("pedido_no_texto_divergente",
                             "um pedido citado no texto não é o de um reembolso executado declarado em 'acoes'"))
    return out


def narrative_violations(final: FinalAnswer) -> list[Violation]:
    words = _TOKEN.findall(normalized(final.text))
    out: list[Violation] = []
    if _claims_done(words, _REFUND_NOUN, _REFUND_DONE):
        if not any(c["tipo"] == REFUND_CLAIM for c in final.claims):
            out.append(Violation("reembolso_alegado_no_texto",
                                 "o texto diz que um reembolso foi feito, mas nenhuma ação confirmada o declara"))
        else:
            out.extend(_refund_mismatches(words, final))
    if _claims_done(words, _PROFILE_NOUN, _PROFILE_DONE) and not any(c["tipo"] == PROFILE_CLAIM
                                                                      for c in final.claims):
        out.append(Violation("cadastro_alegado_no_texto",
                             "o texto diz que o cadastro foi atualizado, mas nenhuma ação confirmada o declara"))
    return out


@dataclass
class ReplyCheck:
    """One turn's checks of final answers: how many were judged, against what."""

    conversation_id: str
    customer_id: int
    evidence: Evidence
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    attempts: int = 0

    def judge(self, answer: Any) -> FinalAnswer | list[Violation]:
        self.attempts += 1
        return review(answer, conversation_id=self.conversation_id, customer_id=self.customer_id,
                      evidence=self.evidence)

    def reject(self, violation: Violation) -> list[Violation]:
        """A response that is not a lone final answer: it counts as an attempt too."""
        self.attempts += 1
        return [violation]

    @property
    def exhausted(self) -> bool:
        return self.attempts >= self.max_attempts


NOT_STRUCTURED = Violation("sem_resposta_estruturada",
                           f"a resposta ao cliente só é entregue pela ferramenta {REPLY_TOOL}")
NOT_ALONE = Violation("resposta_com_outras_chamadas",
                      f"{REPLY_TOOL} deve ser a única chamada da resposta; nenhuma chamada desta resposta foi executada")


def feedback(violations: list[Violation]) -> str:
    """The ``is_error`` body the model reads: what to fix, never the customer's data."""
    lines = "; ".join(f"[{v.code}] {v.message}" for v in violations)
    return (f"Resposta NÃO entregue ao cliente: {lines}. Corrija e chame {REPLY_TOOL} de novo, declarando em "
            "'acoes' só o que uma ferramenta confirmou e sem afirmar no texto nada que não foi feito.")

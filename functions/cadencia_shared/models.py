"""Typed fields and argument models shared by every Lambda edge: ONE definition each.

The tools' arguments models (each beside its row in ``cadencia_shared.catalog``),
the tools' input models, the orchestrator's inbound event and the JSON schemas the
model sees (``orchestrator/tools.py`` derives them from the arguments models) all
use these types, so an id pattern or an amount rule exists once.

Every type carries its own strictness (``Strict()``): no string-to-number coercion,
no ``true`` as customer 1, whatever the config of the model that uses it.

Patterns are written ``\\A…\\Z`` and checked with Python's ``re``: ``^…$`` would let
``"4821\\n"`` through (``$`` matches before a trailing newline), and pydantic's
default Rust engine does not know ``\\Z``. The schema sent to the model carries the
same pattern as ``^…$`` (``json_schema_pattern``): JSON Schema patterns are
ECMA-262, where ``$`` without the ``m`` flag matches only at the end of the input.
"""

from __future__ import annotations

import math
import re
import unicodedata
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    WithJsonSchema,
)

# Identifiers that reach a ledger key: letters, digits and . _ : = + / - (WhatsApp ids
# are base64-like); never "#", the key separator.
CONVERSATION_ID_PATTERN = r"\A[A-Za-z0-9._:=+/-]{1,256}\Z"  # also the channel's message id (wamid)
ORDER_ID_PATTERN = r"\A[A-Za-z0-9._-]{1,64}\Z"
PHONE_E164_PATTERN = r"\A\+[1-9][0-9]{7,14}\Z"

CENT = Decimal("0.01")
MAX_AMOUNT = Decimal("9999999999.99")  # 12 digits: above any order this ERP holds


def json_schema_pattern(pattern: str) -> str:
    """The ECMA-262 (JSON Schema) spelling of one of the ``\\A…\\Z`` patterns above."""
    if not (pattern.startswith(r"\A") and pattern.endswith(r"\Z")):
        raise ValueError(f"pattern must be anchored with \\A…\\Z: {pattern}")
    return "^" + pattern[2:-2] + "$"


def _matching(pattern: str, what: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.match(value):
            raise ValueError(f"{what} inválido: deve corresponder a {json_schema_pattern(pattern)}")
        return value

    return AfterValidator(check)


def _id_type(pattern: str, what: str) -> Any:
    return Annotated[
        str, Strict(), _matching(pattern, what), WithJsonSchema({"type": "string", "pattern": pattern})
    ]


ConversationId = _id_type(CONVERSATION_ID_PATTERN, "identificador")
OrderId = _id_type(ORDER_ID_PATTERN, "pedidoId")
CustomerId = Annotated[int, Strict(), Field(gt=0, lt=2**63)]


# -- amounts -------------------------------------------------------------------
def _amount_from_json_number(value: Any) -> Decimal:
    """A JSON number (int or float as ``json.loads`` gives it) → exact cents.

    Strings are refused (``"10_0"``, ``"٣"``, ``"1E+1"`` all meant something to a
    lax parser); bools are ints to Python and refused explicitly. A float is read
    through ``repr`` (the shortest text that round-trips), so ``10.1`` is 10.10 and
    ``0.30000000000000004`` is refused for having more than two decimals.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("valor deve ser um número JSON (não texto nem booleano)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("valor deve ser um número finito")
    amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if amount <= 0:
        raise ValueError("valor deve ser positivo")
    if amount > MAX_AMOUNT:
        raise ValueError(f"valor deve ser no máximo {MAX_AMOUNT}")
    if amount != amount.quantize(CENT):
        raise ValueError("valor deve ter no máximo duas casas decimais")
    # Normalized to cents so 50, 50.0 and 50.00 are one amount everywhere (ledger,
    # gateway body, idempotency comparison).
    return amount.quantize(CENT)


Amount = Annotated[Decimal, BeforeValidator(_amount_from_json_number), WithJsonSchema({"type": "number"})]


# -- free text ------------------------------------------------------------------
# Rejected, never stripped: stripping would store and act on text that differs from
# what was sent (an address whose visible order was flipped by U+202E still reaches
# the carrier reversed once the control is gone), and would hide the attempt from
# the audit. A typed error says what is wrong and changes nothing.
#   Cc control characters (C0, DEL, C1 incl. U+0085 NEL, U+009B CSI)
#   Cf format characters (bidi embeddings/overrides U+202A–202E, isolates U+2066–2069,
#      marks U+200E/200F/061C, zero-width U+200B–200D, U+FEFF, tags)
#   Zl/Zp line and paragraph separators U+2028/U+2029
#   Co private use, Cs lone surrogates, Cn unassigned
#   and the default-ignorable characters outside those categories that render as
#   nothing: the Hangul fillers U+115F, U+1160, U+3164, U+FFA0 (letters, Lo) and the
#   combining grapheme joiner U+034F (Mn) -- "Rua" + five fillers would pass as an address.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
_INVISIBLE_CHARACTERS = frozenset("\u115f\u1160\u3164\uffa0\u034f")
# A customer's message may span lines, and emoji sequences join with ZWJ (U+200D).
_MESSAGE_ALLOWED = frozenset("\n\r\t\u200d")


def _no_control_characters(allowed: frozenset[str]) -> BeforeValidator:
    # A *before* validator: it sees the text as sent, before ``strip_whitespace``
    # (Python's strip() removes U+2028/2029, U+0085, VT and FF at the ends, which
    # would otherwise be silently dropped instead of refused). Non-strings pass on to
    # the strict ``str`` check, which refuses them.
    def check(value: Any) -> Any:
        if isinstance(value, str):
            for char in value:
                if char not in allowed and (unicodedata.category(char) in _FORBIDDEN_CATEGORIES
                                            or char in _INVISIBLE_CHARACTERS):
                    raise ValueError(f"caractere de controle ou de formatação não permitido: U+{ord(char):04X}")
        return value

    return BeforeValidator(check)


SingleLineText = _no_control_characters(frozenset())
MessageText = _no_control_characters(_MESSAGE_ALLOWED)

Address = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=5, max_length=300),
                    SingleLineText]
PhoneE164 = Annotated[str, Strict(), _matching(PHONE_E164_PATTERN, "telefone"),
                      WithJsonSchema({"type": "string", "pattern": PHONE_E164_PATTERN})]
Email = Annotated[str, Strict(), StringConstraints(max_length=254), SingleLineText,
                  WithJsonSchema({"type": "string", "format": "email"})]
CustomerMessage = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=1, max_length=4000),
                            MessageText]

EDGE_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True)


class ToolRequest(BaseModel):
    """Every tool event carries the conversation and the customer, injected by the
    orchestrator from the inbound message: the model never chooses them."""

    model_config = EDGE_CONFIG

    conversaId: ConversationId
    clienteId: CustomerId


# -- approvals --------------------------------------------------------

APPROVAL_ID_PATTERN = r"\A[0-9a-f]{32}\Z"  # ledger.approval_id: 32 hex digits
APPROVER_PATTERN = r"\A[a-z0-9][a-z0-9._@-]{0,63}\Z"  # an operator's login, e-mail or IAM user name

ApprovalId = _id_type(APPROVAL_ID_PATTERN, "aprovacaoId")
ApproverId = _id_type(APPROVER_PATTERN, "aprovador")
Justification = Annotated[str, Strict(), StringConstraints(strip_whitespace=True, min_length=3, max_length=500),
                          SingleLineText]


class DecisionRequest(BaseModel):
    """A person's decision on one approval request (the decision Lambda's event)."""

    model_config = EDGE_CONFIG

    acao: Literal["decidir"]
    aprovacaoId: ApprovalId
    decisao: Literal["aprovar", "negar"]
    aprovador: ApproverId
    justificativa: Justification


class PendingListRequest(BaseModel):
    model_config = EDGE_CONFIG

    acao: Literal["listar"]


class ExpireRequest(BaseModel):
    """Close the requests whose expiry passed undecided (each conversation is resumed)."""

    model_config = EDGE_CONFIG

    acao: Literal["expirar"]


class ShowRequest(BaseModel):
    model_config = EDGE_CONFIG

    acao: Literal["mostrar"]
    aprovacaoId: ApprovalId

"""Every Lambda edge is its own trust boundary: lax or hostile input gets a small
typed error and changes nothing — no ERP row, no ledger item, no gateway debit.

Run against the real stack (PostgreSQL as each tool's user, the loopback gateway
counting debits, moto's DynamoDB), the handlers called as Lambda calls them.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.catalog import ATUALIZAR_CADASTRO, CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO, LEDGER_TABLE
from cadencia_shared.models import CONVERSATION_ID_PATTERN, ORDER_ID_PATTERN, PHONE_E164_PATTERN, json_schema_pattern
from orchestrator import handler as orchestrator_handler
from orchestrator.invokers.local import LocalContext
from orchestrator.tools import INPUT_SCHEMAS, validation_errors

from .support.seal_harness import ledger_items

VALID = {
    EMITIR_REEMBOLSO.name: {"conversaId": "conv-edges", "clienteId": 1001, "pedidoId": "4821", "valor": 50.0},
    CONSULTAR_STATUS_PEDIDO.name: {"conversaId": "conv-edges", "clienteId": 1001, "pedidoId": "4821"},
    ATUALIZAR_CADASTRO.name: {"conversaId": "conv-edges", "clienteId": 1001,
                              "campos": {"endereco": "Rua das Flores, 12", "email": "ana@example.com"}},
}
SPECS = {s.name: s for s in (EMITIR_REEMBOLSO, CONSULTAR_STATUS_PEDIDO, ATUALIZAR_CADASTRO)}

# The characters the docs name (docs/architecture.md, *Free text*): bidi, zero-width, separators, C0/C1.
DISPLAY_CONTROLS = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
                    "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029", "\u0085", "\u009b",
                    "\x00", "\x1b", "\x7f", "\ufeff", "\ue000", "\n", "\t"]


def _erp_snapshot(erp) -> list[Any]:
    return [erp.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()  # noqa: S608 (fixed names)
            for table in ("clientes", "pedidos", "reembolsos")]


class NothingChanged:
    """Snapshot of everything a tool could change, compared after the calls."""

    def __init__(self, erp, gateway, mocked_aws) -> None:
        self.erp, self.gateway, self.ddb = erp, gateway, mocked_aws["dynamodb"]
        self.before = _erp_snapshot(erp)

    def check(self) -> None:
        assert _erp_snapshot(self.erp) == self.before, "an ERP row changed"
        assert not ledger_items(self.ddb), "a ledger item was written"
        assert self.gateway.stats()["reembolso"] == 0, "the gateway was called"


@pytest.fixture
def unchanged(tools, gateway, erp, mocked_aws) -> NothingChanged:
    return NothingChanged(erp, gateway, mocked_aws)


def _assert_logged_small(caplog: pytest.LogCaptureFixture) -> None:
    # Every attribute of every record (the JSON formatter prints them all).
    assert caplog.records
    for record in caplog.records:
        assert len(json.dumps(record.__dict__, default=str)) < 3_000


def _assert_typed_refusal(out: dict[str, Any], tool: str) -> None:
    assert out["ok"] is False and out["ferramenta"] == tool
    # The model's parse refuses it (entrada_invalida), or SEAL's edge before it: an identity no
    # turn could bind opens no session (1001), a refund amount that is no number counts as
    # above any limit (2004). Either way a typed answer and nothing changed.
    assert out["erro"]["codigo"] in ("entrada_invalida", "selo_recusado")
    assert len(json.dumps(out)) < 2_000


# -- lax inputs pydantic's default mode coerces, each of which once debited ----------
@pytest.mark.parametrize("change", [
    {"valor": "10_0"}, {"valor": "٣"}, {"valor": "1E+1"}, {"valor": "50"}, {"valor": True},
    {"valor": float("nan")}, {"valor": float("inf")}, {"valor": 0.30000000000000004}, {"valor": 10**13},
    {"clienteId": "1_001"}, {"clienteId": True}, {"clienteId": "1001"}, {"clienteId": 1001.0},
    {"pedidoId": "4821\n"}, {"pedidoId": 4821}, {"conversaId": "conv\n"}, {"conversaId": True},
])
def test_lax_refund_input_is_refused_and_debits_nothing(tools, unchanged, change):
    out = tools(EMITIR_REEMBOLSO, {**VALID[EMITIR_REEMBOLSO.name], **change})
    _assert_typed_refusal(out, EMITIR_REEMBOLSO.name)
    unchanged.check()


def test_a_valid_refund_still_goes_through(tools, gateway):
    # The control for the test above: the same event, untouched, does debit.
    assert tools(EMITIR_REEMBOLSO, VALID[EMITIR_REEMBOLSO.name])["ok"] is True
    assert gateway.stats()["reembolso"] == 1


@pytest.mark.parametrize("tool", sorted(VALID))
@pytest.mark.parametrize("event", [[], ["a"], "texto", None, 7, True,
                                   json.dumps(VALID[EMITIR_REEMBOLSO.name])])
def test_a_non_object_event_gets_a_typed_error(tools, unchanged, tool, event):
    out = tools(SPECS[tool], event)
    _assert_typed_refusal(out, tool)
    assert "objeto JSON" in out["erro"]["mensagem"]
    unchanged.check()


@pytest.mark.parametrize("char", DISPLAY_CONTROLS)
def test_display_controls_in_an_address_are_refused_not_stripped(tools, unchanged, char):
    event = {**VALID[ATUALIZAR_CADASTRO.name], "campos": {"endereco": f"Rua das Flores{char}, 12"}}
    out = tools(ATUALIZAR_CADASTRO, event)
    _assert_typed_refusal(out, ATUALIZAR_CADASTRO.name)
    unchanged.check()


def test_a_5_mb_event_gets_a_small_answer_and_small_log_lines(tools, unchanged, caplog):
    huge = "9" * 5_000_000
    event = {**VALID[EMITIR_REEMBOLSO.name], "pedidoId": huge, huge[:100_000]: huge, "valor": huge,
             **{f"extra{i}": i for i in range(10_000)}}
    caplog.set_level("DEBUG")
    out = tools(EMITIR_REEMBOLSO, event)
    _assert_typed_refusal(out, EMITIR_REEMBOLSO.name)
    _assert_logged_small(caplog)
    unchanged.check()


# -- the orchestrator's entry -------------------------------------------------------
TURN = {"conversaId": "conv-1", "clienteId": 1001, "mensagemId": "wamid.1", "mensagem": "Oi"}


@pytest.mark.parametrize("event", [
    json.dumps(TURN), [TURN], None, "Oi",
    {**TURN, "clienteId": True}, {**TURN, "clienteId": "1001"}, {**TURN, "mensagemId": "wamid.1\n"},
    {**TURN, "mensagem": "Oi \u202e"}, {**TURN, "mensagem": "x" * 5_000_000}, {**TURN, "extra": 1},
])
def test_the_orchestrator_refuses_what_is_not_a_strict_turn(event, caplog):
    caplog.set_level("DEBUG")
    out = orchestrator_handler.lambda_handler(event, LocalContext("cadencia-orquestrador"))
    assert out["status"] == "erro" and out["motivo"] == "entrada_invalida" and out["resposta"] is None
    assert len(json.dumps(out)) < 2_000
    _assert_logged_small(caplog)


def test_a_customer_message_may_have_line_breaks_and_emoji():
    from orchestrator.events import TurnRequest

    TurnRequest.model_validate({**TURN, "mensagem": "Oi!\nMeu pedido 4821 👨\u200d👩\u200d👧 chegou?"})


# -- one definition per pattern: the schema the model sees is derived from it ------
def test_the_model_sees_the_same_patterns_the_tools_enforce():
    assert INPUT_SCHEMAS[EMITIR_REEMBOLSO.name]["properties"]["pedidoId"]["pattern"] == json_schema_pattern(
        ORDER_ID_PATTERN)
    assert INPUT_SCHEMAS[CONSULTAR_STATUS_PEDIDO.name]["properties"]["pedidoId"]["pattern"] == json_schema_pattern(
        ORDER_ID_PATTERN)
    telefone = INPUT_SCHEMAS[ATUALIZAR_CADASTRO.name]["properties"]["campos"]["properties"]["telefone"]
    assert telefone["pattern"] == json_schema_pattern(PHONE_E164_PATTERN)
    assert INPUT_SCHEMAS[EMITIR_REEMBOLSO.name]["properties"]["valor"]["type"] == "number"
    for schema in INPUT_SCHEMAS.values():
        assert "conversaId" not in schema["properties"] and "clienteId" not in schema["properties"]
        assert schema["additionalProperties"] is False


@pytest.mark.parametrize("pattern, sample", [(CONVERSATION_ID_PATTERN, "conv-1"), (ORDER_ID_PATTERN, "4821"),
                                             (PHONE_E164_PATTERN, "+5511987654321")])
def test_patterns_are_anchored_at_the_very_end(pattern, sample):
    assert pattern.startswith(r"\A") and pattern.endswith(r"\Z")
    assert re.match(pattern, sample) and not re.match(pattern, sample + "\n")


def test_the_orchestrator_refuses_a_trailing_newline_before_any_ceiling_counter():
    assert validation_errors(EMITIR_REEMBOLSO.name, {"pedidoId": "4821\n", "valor": 10})
    assert validation_errors(CONSULTAR_STATUS_PEDIDO.name, {"pedidoId": "4821\n"})
    assert validation_errors(EMITIR_REEMBOLSO.name, {"pedidoId": "4821", "valor": "10"})
    assert validation_errors(EMITIR_REEMBOLSO.name, ["4821"])
    assert not validation_errors(EMITIR_REEMBOLSO.name, {"pedidoId": "4821", "valor": 10.5})


# -- hostile inputs, generated: ≥ 500 per tool ----------------------------------------
def _is_valid_amount(x: float) -> bool:
    # An independent oracle (float arithmetic, not the Decimal code under test).
    return (math.isfinite(x) and 0 < x <= 9_999_999_999.99 and round(x, 2) == x
            and Decimal(repr(x)).as_tuple().exponent >= -2)


_forbidden_char = st.sampled_from([*DISPLAY_CONTROLS, "#", " ", "ç", "٣", "\xa0"])
_bad_id = st.one_of(
    st.builds(lambda s, c, i: s[:i] + c + s[i:], st.from_regex(r"\A[A-Za-z0-9]{1,20}\Z"), _forbidden_char,
              st.integers(0, 20)),
    st.just(""), st.text(min_size=257, max_size=300, alphabet="0123456789"),  # too long for any id
    st.integers(), st.booleans(), st.none(), st.floats(), st.lists(st.integers(), max_size=2),
)
_bad_amount = st.one_of(
    st.text(max_size=12), st.booleans(), st.none(), st.integers(max_value=0), st.integers(min_value=10**10),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not _is_valid_amount(x)),
    st.lists(st.floats(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_bad_customer = st.one_of(st.booleans(), st.integers(max_value=0), st.integers(min_value=2**63), st.text(max_size=20),
                          st.floats(), st.none())
_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _hostile(tool: str) -> st.SearchStrategy[Any]:
    base = VALID[tool]
    field_attacks = [
        st.builds(lambda v: {**base, "conversaId": v}, _bad_id),
        st.builds(lambda v: {**base, "clienteId": v}, _bad_customer),
        st.builds(lambda k, v: {**base, k: v}, st.text(min_size=1, max_size=10).filter(lambda k: k not in base),
                  _junk),
        st.builds(lambda k: {key: v for key, v in base.items() if key != k}, st.sampled_from(sorted(base))),
        _junk.filter(lambda v: not isinstance(v, dict)),
    ]
    if "pedidoId" in base:
        field_attacks.append(st.builds(lambda v: {**base, "pedidoId": v}, _bad_id))
    if "valor" in base:
        field_attacks.append(st.builds(lambda v: {**base, "valor": v}, _bad_amount))
    if "campos" in base:
        control = _forbidden_char.filter(lambda c: c not in " #ç٣\u00a0")
        bad_text = st.builds(lambda s, c: s + c + s, st.text(alphabet="abc ", min_size=3, max_size=10), control)
        field_attacks += [
            st.builds(lambda v: {**base, "campos": {"endereco": v}}, bad_text | st.integers() | st.booleans()),
            st.builds(lambda v: {**base, "campos": {"telefone": v}}, st.text(max_size=16).filter(
                lambda t: not re.match(PHONE_E164_PATTERN, t)) | st.integers()),
            st.builds(lambda v: {**base, "campos": {"email": v}}, bad_text | st.just("a@b.com\n") | st.integers()),
            st.just({**base, "campos": {}}), st.builds(lambda v: {**base, "campos": v}, _junk),
        ]
    return st.one_of(field_attacks)


@pytest.mark.parametrize("tool", sorted(VALID))
def test_hostile_inputs_get_typed_errors_and_change_nothing(tools, unchanged, tool):
    seen = []

    @settings(max_examples=600, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(event=_hostile(tool))
    def attack(event):
        out = tools(SPECS[tool], event)
        _assert_typed_refusal(out, tool)
        seen.append(event)

    attack()
    assert len(seen) >= 500
    unchanged.check()


def test_a_trailing_newline_from_the_model_never_reaches_the_ceiling_or_a_tool(mocked_aws):
    from orchestrator.events import TurnRequest
    from orchestrator.model import Deadline

    from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
    from .support.orchestrators import CountingInvoker, build

    model = ScriptedModel(tool_use(EMITIR_REEMBOLSO.name, {"pedidoId": "4821\n", "valor": 10}), text_reply("ok"))
    invoker = CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    orch.handle(TurnRequest.model_validate(TURN), Deadline.after(60))
    (result,) = model.tool_results(1)
    assert result["is_error"] is True and json.loads(result["content"])["erro"] == "entrada_invalida"
    assert sum(invoker.calls.values()) == 0
    kinds = {item["tipo"]["S"] for item in mocked_aws["dynamodb"].scan(TableName=LEDGER_TABLE)["Items"]}
    assert kinds and "contador_tentativas" not in kinds and "tentativa" not in kinds

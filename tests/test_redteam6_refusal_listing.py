"""Red team of the read-decided refusal's listing rule.

``Ledger.attempts`` lists a ``TETO_DE_TENTATIVAS_ATINGIDO`` link as a refusal record
of its own when its number is past every number its key's counter gave. Attacked
here: which counter is "its key's" (a counter of the release before attempt records
carries no ``assunto``/``ferramenta`` fields), links whose details are no object, and
forged details of every type — against the local stack's moto server in the mode
without an audit chain (``auditoria#`` ledger items), and the pure rule under
hypothesis.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared.ledger.attempts import CEILING_EVENT, read_decided_records
from cadencia_shared.ledger.table import counter_pk
from tests.test_audit_chain import anchored, audit  # noqa: F401
from tests.test_legacy_counters import CEILING, REFUND, _ledger, _legacy_table


def _refusal_link(number: Any, subject: Any = "4821", tool: Any = REFUND) -> dict[str, Any]:
    """A refusal's link details, exactly as ``RetryCeiling.decide`` writes them."""
    return {"ferramenta": tool, "assunto": subject, "pedidoId": "4821", "tentativaNumero": number,
            "teto": CEILING, "motivo": "teto", "mensagemId": "m1"}


def test_refusal_links_of_an_unconverted_legacy_counter_are_not_listed_as_read_decided(local_stack):
    """A counter of the release before attempt records (``tentativas`` 6, no series
    fields) refused 5 and 6 and linked them. Its refusals are its ``tentativa#`` items
    (``history``): neither number is past the counter, so neither link is a
    read-decided refusal. Matching counters by their stored ``assunto``/``ferramenta``
    missed this counter and listed both as refusals no counter gave."""
    conv = f"conv-legado-{uuid.uuid4().hex[:6]}"
    ledger = _ledger(local_stack.aws_endpoint, _legacy_table(local_stack.aws_endpoint, conv, 6))
    for number in (5, 6):
        ledger.append_audit(conversation_id=conv, event=CEILING_EVENT, details=_refusal_link(number))
    assert list(ledger.attempts(conv)) == []
    # A read-decided refusal past it (7) is still listed, once, with its number.
    ledger.append_audit(conversation_id=conv, event=CEILING_EVENT, details=_refusal_link(7))
    assert [(r["tentativaNumero"], r["resultado"]) for r in ledger.attempts(conv)] == [(7, "bloqueado_por_teto")]


def test_a_link_whose_details_are_no_object_or_name_no_counter_key_is_skipped_not_a_crash(local_stack):
    """No-chain mode: an ``auditoria#`` item whose ``detalhes`` is JSON but not an
    object (a forged or damaged item) made ``Ledger.attempts`` raise AttributeError,
    and one naming a subject or tool no key can hold (empty, with ``#``) ValueError:
    ``prova`` and the harness could not list the conversation at all."""
    conv = f"conv-forjada-{uuid.uuid4().hex[:6]}"
    ledger = _ledger(local_stack.aws_endpoint, _legacy_table(local_stack.aws_endpoint, conv, 0))
    for hostile in ([1, 2], "texto", 5, None):
        ledger.append_audit(conversation_id=conv, event=CEILING_EVENT, details=hostile)  # type: ignore[arg-type]
    ledger.append_audit(conversation_id=conv, event="CHAMADA_DE_FERRAMENTA", details=[])  # type: ignore[arg-type]
    # Subjects/tools no counter key can hold (``checked_id``): counter_pk raised ValueError.
    for subject, tool in (("", REFUND), ("48#21", REFUND), ("4821", "emitir#reembolso")):
        for event in (CEILING_EVENT, "CHAMADA_DE_FERRAMENTA"):
            ledger.append_audit(conversation_id=conv, event=event, details=_refusal_link(5, subject, tool))
    ledger.append_audit(conversation_id=conv, event=CEILING_EVENT, details=_refusal_link(5))
    assert [r["tentativaNumero"] for r in ledger.attempts(conv)] == [5]


_ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                         lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                     max_size=3), max_leaves=6)
_DETAILS = st.fixed_dictionaries({
    "ferramenta": st.one_of(st.sampled_from([REFUND, "consultar_pedido"]), _ANY_JSON),
    "assunto": st.one_of(st.sampled_from(["4821", "9999", "77", "", "48#21"]), _ANY_JSON),
    "tentativaNumero": st.one_of(st.integers(-3, 12), st.integers(min_value=10**30), _ANY_JSON),
    "teto": st.one_of(st.just(CEILING), _ANY_JSON),
    "pedidoId": st.one_of(st.sampled_from(["4821", None]), _ANY_JSON)})


def _counter(conv: str, subject: str, tool: str, attempts: int, *, fields: bool) -> dict[str, Any]:
    counter: dict[str, Any] = {"pk": counter_pk(conv, subject, tool), "tentativas": attempts}
    if fields:
        counter.update({"assunto": subject, "ferramenta": tool, "pedidoId": subject})
    return counter


def _key_part(value: Any) -> bool:
    """What a counter key can hold as a part: a non-empty string without ``#``."""
    return isinstance(value, str) and value != "" and "#" not in value


@settings(max_examples=400, deadline=None)
@given(st.lists(_DETAILS, max_size=6), st.integers(0, 12), st.integers(0, 12), st.booleans())
def test_every_listed_link_is_well_typed_and_judged_against_its_own_keys_counter(links, first, second, fields):
    """Any details: no crash; each listed record is one link of a subject and tool a key can hold
    and int (never bool) number >= 1 and ceiling, past the counter of ITS key or not
    the first link of a number that counter refused (two
    keys, counters with or without series fields), its order id a str or None."""
    conv = "conv-h"
    counters = [_counter(conv, "4821", REFUND, first, fields=fields),
                _counter(conv, "9999", REFUND, second, fields=fields)]
    gave = {("4821", REFUND): first, ("9999", REFUND): second}
    listed = read_decided_records(conv, [("2026-12-02T00:00:00.000Z", d) for d in links], counters)
    expected, counters_link_seen = [], set()
    for d in links:
        number = d.get("tentativaNumero")
        if not (type(number) is int and type(d.get("teto")) is int and number >= 1
                and _key_part(d.get("assunto")) and _key_part(d.get("ferramenta"))):
            continue
        series = (d["assunto"], d["ferramenta"], number)
        # The first link of a number the counter gave and refused is the counter's own.
        if number <= gave.get(series[:2], 0) and number > d["teto"] and series not in counters_link_seen:
            counters_link_seen.add(series)
            continue
        expected.append(d)
    assert [(r["assunto"], r["ferramenta"], r["tentativaNumero"]) for r in listed] == [
        (d["assunto"], d["ferramenta"], d["tentativaNumero"]) for d in expected]
    for record in listed:
        assert record["pedidoId"] is None or isinstance(record["pedidoId"], str)
        assert record["conversaId"] == conv and record["decisao"] == "bloqueada_por_teto"



def test_a_call_link_without_a_usable_outcome_leaves_its_record_pending_not_a_crash(local_stack):
    """A ``CHAMADA_DE_FERRAMENTA`` link that names an allowed attempt but carries no
    ``resultado`` (or not a string) raised KeyError in ``with_outcomes``: one damaged
    link hid the whole conversation from ``prova``. It is no evidence of an outcome:
    the record stays ``pendente``, and a well-formed link of another attempt still joins."""
    conv = f"conv-chamada-{uuid.uuid4().hex[:6]}"
    ledger = _ledger(local_stack.aws_endpoint, _legacy_table(local_stack.aws_endpoint, conv, 0))
    first, second, third = (ledger.register_attempt(conversation_id=conv, subject="4821", tool=REFUND,
                                                    ceiling=CEILING, order_id="4821") for _ in range(3))
    call = {"ferramenta": REFUND, "assunto": "4821", "decisao": "permitida"}
    ledger.append_audit(conversation_id=conv, event="CHAMADA_DE_FERRAMENTA", details={**call, "tentativaNumero": 1})
    ledger.append_audit(conversation_id=conv, event="CHAMADA_DE_FERRAMENTA",
                        details={**call, "tentativaNumero": 2, "resultado": {"x": 1}})
    ledger.append_audit(conversation_id=conv, event="CHAMADA_DE_FERRAMENTA",
                        details={**call, "tentativaNumero": 3, "resultado": "executado"})
    assert [(r["tentativaNumero"], r["resultado"]) for r in ledger.attempts(conv)] == [
        (first.number, "pendente"), (second.number, "pendente"), (third.number, "executado")]


def _drop_marks(chain: Any, conv: str) -> None:
    """The conversation item as a path without marks sees it: the counter decides."""
    from cadencia_shared.ledger.exhausted import EXHAUSTED_ATTRIBUTE
    from cadencia_shared.ledger.table import conversation_pk

    chain.client.update_item(TableName=chain.anchor_table, Key={"pk": {"S": conversation_pk(conv)}},
                             UpdateExpression=f"REMOVE {EXHAUSTED_ATTRIBUTE}")


def test_both_refusal_paths_link_the_same_fields_and_a_mixed_key_lists_each_refusal_once(anchored):  # noqa: F811
    """Real orchestrator turns on one key: 4 allowed; refusal 5 by the counter (marks
    removed, as on a path without the lease); refusal 6 read-decided (the counter's
    answer marked the key); refusal 7 by the counter again (marks removed): the
    counter's 6th number, so it collides with the read-decided 6; refusal 8
    read-decided (7). The two paths' links have one key set, and the listing holds
    every one of the four refusals once: the counter writes ONE link per number it
    refuses, so a second link of a number the counter refused is a read-decided
    refusal. The rule "listed only when past the counter" lost the read-decided 6."""
    from tests.test_ceiling_hint import ALLOWED, _ceiling_links, _four_attempts, _hand_back, _ledger as chain_ledger
    from tests.test_ceiling_hint import _counter as counter_of
    from tests.test_ceiling_hint import _refund, _turn

    conv = f"conv-misto-{uuid.uuid4().hex[:6]}"
    _four_attempts(chain_ledger(anchored), conv)
    paths = []
    for message, by_counter in (("m-5", True), ("m-6", False), ("m-7", True), ("m-8", False)):
        if by_counter:
            _drop_marks(anchored, conv)
        before = int(counter_of(chain_ledger(anchored), conv)["tentativas"])
        reply = _turn(chain_ledger(anchored), conv, message, _refund())
        assert (reply.status, reply.motivo) == ("aguardando_humano", "teto")
        after = int(counter_of(chain_ledger(anchored), conv)["tentativas"])
        paths.append(after - before)  # 1: the counter numbered it; 0: read-decided
        _hand_back(anchored, conv)
    assert paths == [1, 0, 1, 0]
    links = _ceiling_links(anchored, conv)
    assert [link["tentativaNumero"] for link in links] == [5, 6, 6, 7]
    assert len({frozenset(link) for link in links}) == 1  # one kind of refusal link
    refused = [(5, "bloqueado_por_teto"), (6, "bloqueado_por_teto"), (6, "bloqueado_por_teto"),
               (7, "bloqueado_por_teto")]
    assert _listed(chain_ledger(anchored), conv) == [*ALLOWED, *refused]
    assert anchored.verify(conv)[1] is None


def _listed(ledger: Any, conv: str) -> list[tuple[int, str]]:
    return [(a["tentativaNumero"], a["resultado"]) for a in ledger.attempts(conv)]


def test_refusals_past_the_listed_ones_and_a_legacy_base_are_judged_by_the_right_record():
    """A converted legacy counter (``registrosBase`` 2) with ``registros`` 3..8 (6..8
    refused) and two unlisted refusals (9, 10): one link for each refused number is
    the counter's own and not listed again; a second link of the unlisted 10 and one
    of 11 are read-decided and listed; a link at the allowed 3 (a ceiling since
    raised: the counter allowed 3, so no link of 3 is the counter's) is listed."""
    conv = "conv-u"
    records = [{"timestamp": f"2026-12-02T00:00:0{n}.000Z", "teto": CEILING} for n in range(3, 9)]
    counter = {**_counter(conv, "4821", REFUND, 10, fields=True), "registrosBase": 2, "registros": records,
               "recusasNaoListadas": 2}
    numbers = [5, 6, 7, 8, 9, 10, 10, 11, 3]
    links = [("2026-12-02T00:01:00.000Z", _refusal_link(n)) for n in numbers]
    listed = read_decided_records(conv, links, [counter])
    assert [r["tentativaNumero"] for r in listed] == [10, 11, 3]
    assert {r["pedidoId"] for r in listed} == {"4821"}

"""The retry ceiling's records: one counter item per (conversation, subject, tool), holding its attempts.

``contador#{conversa}#{assunto}#{ferramenta}`` is numbered by ``UpdateItem ADD``:
DynamoDB applies it atomically, so N racing callers get the numbers 1..N, each
exactly once, and exactly ``ceiling`` of them are allowed (DESIGN invariant 2). No
read precedes it: there is no count-then-act window (the race in Lab 87's Query).

The SAME update appends the attempt's record to the item's ``registros`` list
(``list_append``): the record of attempt n is ``registros[n-1]``, written before
the tool is invoked — the decision and the write-ahead evidence. The call's
outcome is written ONCE, after the invoke, on its ``CHAMADA_DE_FERRAMENTA``
audit-chain link (``orchestrator.controls.DecisionAudit``), never back on the
record: readers join the two (``Ledger.attempts``, ``with_outcomes``) by
(ferramenta, assunto, tentativaNumero). An allowed record with no link is
``pendente`` (a process died between decision and link, or a later control
refused the call); a refused record is ``bloqueado_por_teto`` from its write.
Records written by the release before this join carry their own ``resultado``,
which is kept.

A refusal may also be decided WITHOUT this write: when the turn's conversation
already knows the key reached the ceiling (``exhausted`` module: counters only
grow, so the counter could only refuse it too). Such a refusal's one record is its
``CEILING_EVENT`` link (numbered last known + 1, the fields of any refusal's link);
``Ledger.attempts`` lists it beside the counters' records (``read_decided_records``):
it is a link whose number is past every number its counter gave, or a further link of a number
the counter gave and refused (the counter links each number it refuses once).

Bounded item: the list keeps the ``ceiling`` allowed attempts and at most
``REFUSALS_LISTED`` refused ones after them (the append's condition). A refusal
past that still takes its number (a second ``ADD`` without the append, counted in
``recusasNaoListadas``) and is still a metric and an audit-chain link; it is just
not listed. A counter from an older release (``tentativas`` and ``tentativa#``
items, no list) is converted once on its next attempt: ``registrosBase`` keeps
the attempts numbered before, which stay readable as those items (``history``).
A record is ~80 bytes (the series' constant fields live once on the
item; ``detalhe`` ≤ ``RESULT_DETAIL_MAX`` only on a tool's refusal), so with the
default ceiling of 4 the item stays under 1 KB (one write unit) unless the tool
answers long error codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import ClientError

from ..dynamo_types import failed_condition_item
from .table import (
    GSI_BY_CONVERSATION,
    GSI_PARTITION,
    GSI_SORT,
    TABLE_KEY,
    ItemType,
    LedgerTable,
    checked_id,
    condition_failed,
    counter_history_sort,
    counter_pk,
    serialize,
)

ATTEMPT_EVENT = "TENTATIVA_DE_FERRAMENTA_REGISTRADA"
CALL_EVENT = "CHAMADA_DE_FERRAMENTA"  # an invoked call's audit link: its decision and its outcome
CEILING_EVENT = "TETO_DE_TENTATIVAS_ATINGIDO"  # a refusal's audit link (it also carries the hand-off)
RESULT_DETAIL_MAX = 500  # characters of an attempt's ``detalhe``
REFUSALS_LISTED = 4  # refused attempts kept in ``registros`` after the allowed ones
ATTEMPT_RECORDS = "registros"
UNLISTED_REFUSALS = "recusasNaoListadas"
# Attempts numbered before ``registros`` existed (a counter from an older release,
# its records are ``tentativa#`` items): ``registros[0]`` is attempt ``registrosBase + 1``.
RECORDS_BASE = "registrosBase"


class AttemptResult(StrEnum):
    """``resultado`` of an attempt record (Lab 87's names first)."""

    EXECUTED = "executado"
    BLOCKED_BY_IDEMPOTENCY = "bloqueado_por_idempotencia"
    BLOCKED_BY_CEILING = "bloqueado_por_teto"
    PENDING = "pendente"  # allowed, tool not answered yet
    REFUSED_BY_TOOL = "recusado_pela_ferramenta"  # typed business error (unknown order, bad amount...)
    TOOL_ERROR = "erro_da_ferramenta"  # the tool crashed, timed out or was throttled
    IN_PROGRESS_ELSEWHERE = "em_processamento"  # a concurrent call holds the refund claim
    OUTCOME_UNKNOWN = "resultado_desconhecido"  # gateway did not answer; reconciled later
    DECLINED_BY_GATEWAY = "recusado_pelo_gateway"


@dataclass(frozen=True)
class Attempt:
    conversation_id: str
    subject: str  # the order id, or a fixed subject for calls about no order
    order_id: str | None
    tool: str
    number: int  # 1, 2, ... for this (conversation, subject, tool)
    ceiling: int
    idempotency_key: str | None
    recorded_at: str
    listed: bool = True  # its record is in ``registros`` (else a refusal past the listed ones)

    @property
    def allowed(self) -> bool:
        return self.listed and self.number <= self.ceiling


class AttemptRecorder(Protocol):
    """What the retry ceiling (``orchestrator.controls.RetryCeiling``) needs of the ledger."""

    def register_attempt(self, *, conversation_id: str, subject: str, tool: str, ceiling: int,
                         order_id: str | None = None, idempotency_key: str | None = None,
                         indexed: bool = True) -> Attempt: ...


def _listed_update(conversation_id: str, subject: str, tool: str, ceiling: int, now: str,
                   order_id: str | None, idempotency_key: str | None, indexed: bool) -> dict[str, Any]:
    """Number the attempt AND append its record, if the list is still dense and short.

    Dense (``registros`` holds every attempt after ``registrosBase``: no unlisted
    refusal yet; a counter from before records lived here has no list until
    ``_adopt_legacy_counter`` gives it one) is what makes ``registros[n-1-base]``
    attempt n. ``tentativas < :last`` counts the legacy attempts too: such a list
    is only shorter. Counter, series fields and the history index's keys in one write; the
    index keys are set once (``if_not_exists``), so later updates never rewrite the
    index entry (it projects only the keys and ``tipo``). ``indexed=False`` (a read-only
    tool's counter) leaves the index out: see ``AttemptStore.register_attempt``."""
    series = {":subject": subject, ":tool": tool, ":order": order_id, ":key": idempotency_key}
    sets = [f"{ATTEMPT_RECORDS} = list_append(if_not_exists({ATTEMPT_RECORDS}, :none), :this)",
            "tipo = :type", "atualizadoEm = :now", "assunto = :subject", "ferramenta = :tool",
            *(["pedidoId = :order"] if order_id is not None else []),
            *(["chaveIdempotencia = :key"] if idempotency_key is not None else [])]
    values = {":one": 1, ":none": [], ":this": [{"timestamp": now, "teto": ceiling}], ":type": ItemType.COUNTER.value,
              ":now": now, ":last": ceiling + REFUSALS_LISTED, **series}
    if indexed:
        sets += [f"{GSI_PARTITION} = if_not_exists({GSI_PARTITION}, :conv)",
                 f"{GSI_SORT} = if_not_exists({GSI_SORT}, :sort)"]
        values.update({":conv": conversation_id, ":sort": counter_history_sort(now, subject, tool)})
    return {
        "UpdateExpression": "ADD tentativas :one SET " + ", ".join(sets),
        "ConditionExpression": (f"attribute_not_exists(tentativas) OR (attribute_exists({ATTEMPT_RECORDS}) "
                                f"AND attribute_not_exists({UNLISTED_REFUSALS}) AND tentativas < :last)"),
        "ExpressionAttributeValues": serialize(values),
    }


class AttemptStore:
    """Counters and their attempt records, on ``self.table`` (a ``LedgerTable``)."""

    table: LedgerTable

    def register_attempt(self, *, conversation_id: str, subject: str, tool: str, ceiling: int,
                         order_id: str | None = None, idempotency_key: str | None = None,
                         indexed: bool = True) -> Attempt:
        """Number this attempt with one atomic counter write that also records it.

        ``indexed``: the counter enters the history index (once, at its first attempt:
        one index write unit), so that a call killed between this write and its link —
        whose ``pendente`` record is then the only evidence that it may have changed
        something — is found by conversation. A read-only tool's call changes nothing
        (``ToolSpec.read_only``): its counter stays out of the index, and
        ``Ledger.attempts`` finds it through the call's link, which names it.

        The ``ADD`` on the counter is the whole decision (module doc): exactly
        ``ceiling`` of any number of racing callers get a number <= ``ceiling``.
        Only when the append's condition refuses (the list is full) does a second
        ``ADD`` number the attempt, unlisted and refused whatever its number. A
        legacy counter (``_adopt_legacy_counter``) is converted once, then appended to.
        """
        now = self.table.iso()
        key = self.table.key(counter_pk(conversation_id, subject, tool))
        listed_update = _listed_update(conversation_id, subject, tool, ceiling, now, order_id, idempotency_key,
                                       indexed)
        for _ in range(2):  # at most one conversion, then one more append
            try:
                resp = self.table.client.update_item(
                    TableName=self.table.name, Key=key, ReturnValues="UPDATED_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD", **listed_update)
                return _numbered(resp["Attributes"], conversation_id, subject, tool, ceiling, order_id,
                                 idempotency_key, now, listed=True)
            except ClientError as err:
                if not condition_failed(err):
                    raise
                if not self._adopt_legacy_counter(key, failed_condition_item(err)):
                    break
        resp = self.table.client.update_item(
            TableName=self.table.name, Key=key, ReturnValues="UPDATED_NEW",
            UpdateExpression=f"ADD tentativas :one, {UNLISTED_REFUSALS} :one SET atualizadoEm = :now",
            ExpressionAttributeValues=serialize({":one": 1, ":now": now}))
        return _numbered(resp["Attributes"], conversation_id, subject, tool, ceiling, order_id, idempotency_key,
                         now, listed=False)

    def _adopt_legacy_counter(self, key: dict[str, Any], old: dict[str, Any] | None) -> bool:
        """A counter written before records lived on it (``tentativas``, no ``registros``:
        the append's condition refuses it forever) gets ``registrosBase = tentativas`` and
        an empty list, once — conditional on still being legacy, so of N racing callers one
        converts and all append after it. Its numbers still come from the same ``ADD``:
        the legacy attempts count against the ceiling. ``old`` is the item the failed
        append saw (``ReturnValuesOnConditionCheckFailure``: no extra read). True: retry
        the append (converted, by this call or a racing one)."""
        if not old or "tentativas" not in old or ATTEMPT_RECORDS in old:
            return False
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=key,
                UpdateExpression=f"SET {RECORDS_BASE} = tentativas, {ATTEMPT_RECORDS} = :none",
                ConditionExpression=f"attribute_exists(tentativas) AND attribute_not_exists({ATTEMPT_RECORDS})",
                ExpressionAttributeValues=serialize({":none": []}))
        except ClientError as err:
            if not condition_failed(err):
                raise
        return True

    def attempt_records_of(self, conversation_id: str,
                           named: Iterable[tuple[str, str]] = ()) -> Iterator[dict[str, Any]]:
        """Every listed attempt of one conversation, in time order, one dict each with
        the fields an attempt item had (``tentativaNumero``, ``decisao``, ...): the
        counters' records (``counters_of``). No call outcome yet (``Ledger.attempts``
        joins the links)."""
        counters = self.counters_of(conversation_id, named)
        records = [record for counter in counters for record in attempt_records(counter, conversation_id)]
        return iter(sorted(records, key=lambda r: (r["timestamp"], r["tentativaNumero"])))

    def counters_of(self, conversation_id: str,
                    named: Iterable[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        """One conversation's counter items: those in the history index and those
        ``named`` as (subject, tool) — a read-only tool's, which stay out of the index,
        named by their calls' links."""
        entries = self.table.query_index(GSI_BY_CONVERSATION, GSI_PARTITION, conversation_id,
                                         item_type=ItemType.COUNTER)
        keys = {entry[TABLE_KEY] for entry in entries}
        keys.update(counter_pk(conversation_id, subject, tool) for subject, tool in named)
        return list(self.table.get_many(sorted(keys)).values())


def attempt_records(counter: dict[str, Any] | None, conversation_id: str | None = None) -> list[dict[str, Any]]:
    """A counter item's records as per-attempt dicts. ``decisao`` and a refused
    record's ``resultado`` follow from its number and the ceiling written with it
    (both stored by the one write that numbered it); an allowed record reads
    ``pendente`` until ``with_outcomes`` finds its link."""
    if not counter:
        return []
    series = {"evento": ATTEMPT_EVENT, "conversaId": counter.get(GSI_PARTITION, conversation_id),
              "pedidoId": counter.get("pedidoId"),
              "assunto": counter.get("assunto"), "ferramenta": counter.get("ferramenta"),
              "chaveIdempotencia": counter.get("chaveIdempotencia")}
    out = []
    for number, record in enumerate(counter.get(ATTEMPT_RECORDS, []), start=int(counter.get(RECORDS_BASE, 0)) + 1):
        ceiling = int(record["teto"])
        allowed = number <= ceiling
        default = AttemptResult.PENDING if allowed else AttemptResult.BLOCKED_BY_CEILING
        out.append({**series, **record, "tentativaNumero": number, "teto": ceiling,
                    "decisao": "permitida" if allowed else "bloqueada_por_teto",
                    "resultado": record.get("resultado", default.value)})
    return out


def read_decided_attempt(*, conversation_id: str, subject: str, tool: str, number: int, ceiling: int,
                         order_id: str | None, idempotency_key: str | None) -> Attempt:
    """A refusal decided from the conversation's exhausted keys: no counter record
    (``listed=False``), its time is its audit link's."""
    return Attempt(conversation_id=conversation_id, subject=subject, order_id=order_id, tool=tool, number=number,
                   ceiling=ceiling, idempotency_key=idempotency_key, recorded_at="", listed=False)


def link_series(details: dict[str, Any]) -> tuple[str, str] | None:
    """The (subject, tool) a link names, when a counter key can hold them (non-empty
    strings without ``#``, ``checked_id``); None: a forged or damaged link, which names
    no counter (skipped by the readers, never a crash of the whole listing)."""
    subject, tool = details.get("assunto"), details.get("ferramenta")
    if not (isinstance(subject, str) and isinstance(tool, str)):
        return None
    try:
        return checked_id(subject), checked_id(tool)
    except ValueError:
        return None


def read_decided_records(conversation_id: str, links: Iterable[tuple[str, dict[str, Any]]],
                         counters: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The refusals decided without the counter, as attempt records with the fields
    of the counter's (``attempt_records``), one per ``CEILING_EVENT`` link given as
    (its time, its details), matched to its key's counter (``counters``: ``counters_of``).

    A link whose number is past every number the counter gave is read-decided. A
    number the counter gave and refused has exactly ONE link of the counter's own
    (``RetryCeiling.decide`` links each number it refuses once; the record is listed
    from the counter, or past ``REFUSALS_LISTED`` not at all): every further link of
    that number is a read-decided refusal whose hint was behind the counter (a path
    without the conversation's lease numbered since) and is listed. Lost only when
    the counter's own link is missing too (a turn SIGKILLed between its counter
    write and its link): one link of a refused number is then taken for the
    counter's. Each listed link is its own decision: two read-decided links of one
    number past the counter (a turn killed between its link and its commit, then
    redelivered) are two records."""
    # By the counter's own key, not its stored ``assunto``/``ferramenta``: a counter of
    # the release before attempt records has no such fields, and its refusals' links
    # would all read as past a counter of 0.
    by_key = {counter.get(TABLE_KEY): counter for counter in counters}
    counters_links: set[tuple[str, int]] = set()  # (key, number) whose counter's own link was seen
    out = []
    for at, details in links:
        series, number, ceiling = link_series(details), details.get("tentativaNumero"), details.get("teto")
        if series is None or type(number) is not int or type(ceiling) is not int or number < 1:
            continue  # a forged or damaged link: no counter numbers from 0
        key = counter_pk(conversation_id, *series)
        counter = by_key.get(key) or {}
        if number <= int(counter.get("tentativas", 0)) and (key, number) not in counters_links \
                and _counter_refused(counter, number, ceiling):
            counters_links.add((key, number))
            continue
        subject, tool = series
        order_id = counter.get("pedidoId", details.get("pedidoId"))
        out.append({"evento": ATTEMPT_EVENT, "conversaId": conversation_id,
                    "pedidoId": order_id if isinstance(order_id, str) else None, "assunto": subject,
                    "ferramenta": tool, "chaveIdempotencia": counter.get("chaveIdempotencia"),
                    "timestamp": at, "teto": ceiling, "tentativaNumero": number,
                    "decisao": "bloqueada_por_teto", "resultado": AttemptResult.BLOCKED_BY_CEILING.value})
    return out


def _counter_refused(counter: dict[str, Any], number: int, link_ceiling: int) -> bool:
    """Whether the counter's own decision for ``number`` (one it gave) was a refusal:
    its listed record's ceiling says; an unlisted or legacy number, the link's."""
    base, records = int(counter.get(RECORDS_BASE, 0)), counter.get(ATTEMPT_RECORDS, [])
    if base < number <= base + len(records):
        return number > int(records[number - base - 1]["teto"])
    return number > link_ceiling


def _numbered(attributes: dict[str, Any], conversation_id: str, subject: str, tool: str, ceiling: int,
              order_id: str | None, idempotency_key: str | None, now: str, *, listed: bool) -> Attempt:
    return Attempt(
        conversation_id=conversation_id, subject=subject, order_id=order_id, tool=tool,
        number=int(attributes["tentativas"]["N"]), ceiling=ceiling, idempotency_key=idempotency_key,
        recorded_at=now, listed=listed)


def _link_key(details: dict[str, Any]) -> tuple[Any, Any, Any]:
    return details.get("ferramenta"), details.get("assunto"), details.get("tentativaNumero")


def with_outcomes(records: Iterator[dict[str, Any]] | list[dict[str, Any]],
                  links: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each allowed record with the ``resultado``/``detalhe`` of the call link
    (``CALL_EVENT`` details) of the same (ferramenta, assunto, tentativaNumero);
    none: it stays as written (``pendente``, or the result a record of the previous
    release carries). A refused record is never joined: it was never invoked, and
    a link claiming otherwise is not evidence."""
    # A link with no string ``resultado`` (forged or damaged: every writer sets one) is
    # no evidence of an outcome: its record stays as written rather than the listing failing.
    outcomes = {_link_key(link): link for link in links if isinstance(link.get("resultado"), str)}
    out = []
    for record in records:
        link = outcomes.get((record["ferramenta"], record["assunto"], record["tentativaNumero"]))
        if link is None or record["decisao"] != "permitida" or record["resultado"] != AttemptResult.PENDING.value:
            out.append(record)
            continue
        joined = {**record, "resultado": link["resultado"]}
        if link.get("detalhe"):
            joined["detalhe"] = str(link["detalhe"])[:RESULT_DETAIL_MAX]
        out.append(joined)
    return out

"""The refund as a state machine: one table, the only place that decides what
happens to the money.

A claim is in one state (``ClaimStatus``, stored in the ledger). Something
happens (``Event``: what the gateway answered, or what the process learned).
The table gives the next state and the one money action on the ERP:

- ``RESERVE``: hold the amount for this key (the order's balance shrinks);
- ``HOLD``: keep holding it (the outcome is not known, or not yet);
- ``RELEASE``: the amount is free again — nothing was debited, *proven*;
- ``APPLY``: the gateway debited: the reservation becomes a refund in the ERP.

``RELEASE`` is reachable only through events that prove no money moved for the
key: a decline (the gateway's definitive "no"), or a failure of the *only*
request that could have left (``SENDING`` -> connection refused / a 4xx for that
request), or a claim that never recorded a possible send (secret-store failure
or an abandoned claim still ``IN_PROGRESS``). ``SENDING`` is written, fenced on
the owner, *before* the POST, so "never sent" is only ever said of a claim no
request could have left for. Once a send may have happened (``UNKNOWN``,
``RECONCILING``) nothing but the gateway's answer to the *same* request (same
key, the claim's own order and amount) settles it; "not found", a refused
connection on a later re-send or a secret outage keep the amount held.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cadencia_shared.ledger import ClaimStatus


class Money(StrEnum):
    RESERVE = "reservar"
    HOLD = "manter"
    RELEASE = "liberar"
    APPLY = "aplicar"


class Event(StrEnum):
    CLAIMED = "reivindicada"  # balance checked, amount reserved, key claimed (or retaken)
    SECRET_FAILED = "segredo_falhou"  # the secret store did not answer
    SEND_RECORDED = "envio_registrado"  # "a POST may leave now" is in the ledger
    RECONCILE_TAKEN = "conciliacao_assumida"  # a reconciler took over an unsettled claim
    ABANDONED_BEFORE_SEND = "abandonada_antes_do_envio"  # lease over, no send ever recorded
    APPROVED = "aprovado"  # 200/201 (or an idempotent replay of an approval)
    DECLINED = "recusado"  # 402 (or a replay of a decline): definitive, nothing debited
    NOT_REACHED = "nao_alcancado"  # connection refused / connect timeout for this request
    REJECTED = "rejeitado"  # a 4xx for this request (bad credential, malformed): it moved nothing
    NO_ANSWER = "sem_resposta"  # read timeout, reset, 5xx, 409 in flight, 422 key held
    # past the gateway's idempotency window: a re-send could be a new debit, so none is made
    WINDOW_EXPIRED = "janela_de_idempotencia_expirada"


S = ClaimStatus
ABSENT = None  # no claim yet


@dataclass(frozen=True)
class Step:
    to: ClaimStatus
    money: Money


# (state, event) -> step. Every pair not listed is refused (IllegalTransition).
TABLE: dict[tuple[ClaimStatus | None, Event], Step] = {
    # -- taking the key ------------------------------------------------------------
    (ABSENT, Event.CLAIMED): Step(S.IN_PROGRESS, Money.RESERVE),
    (S.FAILED_BEFORE_GATEWAY, Event.CLAIMED): Step(S.IN_PROGRESS, Money.RESERVE),
    # an abandoned claim that never recorded a send: retaken by a new request
    (S.IN_PROGRESS, Event.CLAIMED): Step(S.IN_PROGRESS, Money.RESERVE),
    # -- before any request may have left ---------------------------------------
    (S.IN_PROGRESS, Event.SECRET_FAILED): Step(S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.IN_PROGRESS, Event.ABANDONED_BEFORE_SEND): Step(S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.IN_PROGRESS, Event.SEND_RECORDED): Step(S.SENDING, Money.HOLD),
    # -- the first and only request for the key -----------------------------------
    (S.SENDING, Event.APPROVED): Step(S.EXECUTED, Money.APPLY),
    (S.SENDING, Event.DECLINED): Step(S.DECLINED, Money.RELEASE),
    (S.SENDING, Event.NOT_REACHED): Step(S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.SENDING, Event.REJECTED): Step(S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.SENDING, Event.NO_ANSWER): Step(S.UNKNOWN, Money.HOLD),
    # -- a request may have left: only the gateway's answer to the same one settles -
    (S.SENDING, Event.RECONCILE_TAKEN): Step(S.RECONCILING, Money.HOLD),  # lease over
    (S.UNKNOWN, Event.RECONCILE_TAKEN): Step(S.RECONCILING, Money.HOLD),
    (S.RECONCILING, Event.RECONCILE_TAKEN): Step(S.RECONCILING, Money.HOLD),  # lease over
    (S.RECONCILING, Event.APPROVED): Step(S.EXECUTED, Money.APPLY),
    (S.RECONCILING, Event.DECLINED): Step(S.DECLINED, Money.RELEASE),
    (S.RECONCILING, Event.NOT_REACHED): Step(S.UNKNOWN, Money.HOLD),
    (S.RECONCILING, Event.REJECTED): Step(S.UNKNOWN, Money.HOLD),
    (S.RECONCILING, Event.NO_ANSWER): Step(S.UNKNOWN, Money.HOLD),
    (S.RECONCILING, Event.SECRET_FAILED): Step(S.UNKNOWN, Money.HOLD),
    # the gateway may have forgotten the key: never re-sent, held for a person
    (S.RECONCILING, Event.WINDOW_EXPIRED): Step(S.UNKNOWN, Money.HOLD),
}

# Claims somebody must still settle with the gateway (the reconciler's work list).
UNSETTLED = frozenset({S.IN_PROGRESS, S.SENDING, S.RECONCILING, S.UNKNOWN})


class IllegalTransition(RuntimeError):
    pass


def step(state: ClaimStatus | None, event: Event) -> Step:
    try:
        return TABLE[(state, event)]
    except KeyError:
        raise IllegalTransition(f"no transition from {state} on {event}") from None

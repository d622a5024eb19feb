"""The refund's state machine, transition by transition: every row of the table
is what it says, releasing money is reachable only on a definitive answer, and
every pair not in the table is refused."""

from __future__ import annotations

import itertools

import pytest

from cadencia_shared.ledger import FINAL_CLAIM_STATUSES, ClaimStatus
from emitir_reembolso.transitions import ABSENT, TABLE, UNSETTLED, Event, IllegalTransition, Money, Step, step

S = ClaimStatus

# Written out independently of the module: changing a row there fails here.
EXPECTED: dict[tuple[ClaimStatus | None, Event], tuple[ClaimStatus, Money]] = {
    (ABSENT, Event.CLAIMED): (S.IN_PROGRESS, Money.RESERVE),
    (S.FAILED_BEFORE_GATEWAY, Event.CLAIMED): (S.IN_PROGRESS, Money.RESERVE),
    (S.IN_PROGRESS, Event.CLAIMED): (S.IN_PROGRESS, Money.RESERVE),
    (S.IN_PROGRESS, Event.SECRET_FAILED): (S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.IN_PROGRESS, Event.ABANDONED_BEFORE_SEND): (S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.IN_PROGRESS, Event.SEND_RECORDED): (S.SENDING, Money.HOLD),
    (S.SENDING, Event.APPROVED): (S.EXECUTED, Money.APPLY),
    (S.SENDING, Event.DECLINED): (S.DECLINED, Money.RELEASE),
    (S.SENDING, Event.NOT_REACHED): (S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.SENDING, Event.REJECTED): (S.FAILED_BEFORE_GATEWAY, Money.RELEASE),
    (S.SENDING, Event.NO_ANSWER): (S.UNKNOWN, Money.HOLD),
    (S.SENDING, Event.RECONCILE_TAKEN): (S.RECONCILING, Money.HOLD),
    (S.UNKNOWN, Event.RECONCILE_TAKEN): (S.RECONCILING, Money.HOLD),
    (S.RECONCILING, Event.RECONCILE_TAKEN): (S.RECONCILING, Money.HOLD),
    (S.RECONCILING, Event.APPROVED): (S.EXECUTED, Money.APPLY),
    (S.RECONCILING, Event.DECLINED): (S.DECLINED, Money.RELEASE),
    (S.RECONCILING, Event.NOT_REACHED): (S.UNKNOWN, Money.HOLD),
    (S.RECONCILING, Event.REJECTED): (S.UNKNOWN, Money.HOLD),
    (S.RECONCILING, Event.NO_ANSWER): (S.UNKNOWN, Money.HOLD),
    (S.RECONCILING, Event.SECRET_FAILED): (S.UNKNOWN, Money.HOLD),
    (S.RECONCILING, Event.WINDOW_EXPIRED): (S.UNKNOWN, Money.HOLD),
}

ALL_STATES: list[ClaimStatus | None] = [ABSENT, *ClaimStatus]
ALL_PAIRS = list(itertools.product(ALL_STATES, Event))


@pytest.mark.parametrize(("state", "event"), sorted(EXPECTED, key=str))
def test_each_row_of_the_table(state, event):
    assert step(state, event) == Step(*EXPECTED[(state, event)])


def test_the_table_has_exactly_the_expected_rows():
    assert {k: (v.to, v.money) for k, v in TABLE.items()} == EXPECTED


@pytest.mark.parametrize(("state", "event"), [p for p in ALL_PAIRS if p not in EXPECTED], ids=str)
def test_every_other_pair_is_refused(state, event):
    with pytest.raises(IllegalTransition):
        step(state, event)


def test_release_only_on_a_definitive_answer():
    """The only releasing rows: a decline, or a failure proven to come before any
    request could have left (no send recorded, or the only request refused)."""
    releasing = {k for k, v in TABLE.items() if v.money is Money.RELEASE}
    assert releasing == {
        (S.IN_PROGRESS, Event.SECRET_FAILED),
        (S.IN_PROGRESS, Event.ABANDONED_BEFORE_SEND),
        (S.SENDING, Event.DECLINED),
        (S.SENDING, Event.NOT_REACHED),
        (S.SENDING, Event.REJECTED),
        (S.RECONCILING, Event.DECLINED),
    }


def test_once_a_request_may_have_left_only_the_gateway_settles():
    """From unknown or reconciling, nothing but an approval or a decline leaves the
    held state: not 'not found', a refused re-send, a 4xx or a secret outage."""
    for (state, event), nxt in TABLE.items():
        if state in (S.UNKNOWN, S.RECONCILING) and event not in (Event.APPROVED, Event.DECLINED):
            assert nxt.money is Money.HOLD and nxt.to in UNSETTLED, (state, event)


def test_final_states_have_no_way_out_and_apply_happens_only_on_approval():
    assert not [k for k in TABLE if k[0] in FINAL_CLAIM_STATUSES]
    assert {k[1] for k, v in TABLE.items() if v.money is Money.APPLY} == {Event.APPROVED}
    assert {k for k, v in TABLE.items() if v.money is Money.RESERVE} == {
        (ABSENT, Event.CLAIMED), (S.FAILED_BEFORE_GATEWAY, Event.CLAIMED), (S.IN_PROGRESS, Event.CLAIMED)}


def test_every_state_is_reachable_from_absent():
    seen, frontier = {ABSENT}, [ABSENT]
    while frontier:
        state = frontier.pop()
        for (src, _), nxt in TABLE.items():
            if src == state and nxt.to not in seen:
                seen.add(nxt.to)
                frontier.append(nxt.to)
    assert seen == set(ALL_STATES)


# --- properties over whole histories ------------------------------------------------

def _histories(depth: int):
    """Every legal history of at most ``depth`` transitions from ABSENT (exhaustive:
    the legal graph is small, so no sampling is needed)."""
    stack = [(ABSENT, ())]
    while stack:
        state, path = stack.pop()
        yield path
        if len(path) < depth:
            stack.extend((nxt.to, (*path, (src, event, nxt))) for (src, event), nxt in TABLE.items() if src == state)


def test_no_history_releases_money_a_request_may_still_move():
    """Along every history: once a request may have left for the key under an
    earlier owner (re-sent by a reconciler), only the gateway's decline releases;
    money is applied at most once; after a release nothing stays reserved twice."""
    count = 0
    for path in _histories(9):
        count += 1
        earlier_send_possible = current_send = False
        applied = 0
        for _src, event, nxt in path:
            if nxt.money is Money.RELEASE and event is not Event.DECLINED:
                assert not earlier_send_possible, path
            applied += nxt.money is Money.APPLY
            if event is Event.RECONCILE_TAKEN:
                earlier_send_possible = True
            current_send = (current_send or event is Event.SEND_RECORDED) and nxt.to is not S.FAILED_BEFORE_GATEWAY
            if nxt.to is S.UNKNOWN:
                earlier_send_possible = earlier_send_possible or current_send
        assert applied <= 1, path
    assert count > 1000  # the walk really explored the graph


def test_the_refund_logic_moves_money_only_through_the_table():
    """In the refund logic, ERP releases and applications happen inside
    ``transition``, plus the repair of an executed claim's lost ERP update (``_decide``
    on a repeat, ``finish_executed`` for the reconciler; idempotent per key), nowhere else."""
    import ast
    import inspect

    from emitir_reembolso import logic

    tree = ast.parse(inspect.getsource(logic))
    callers: dict[str, set[str]] = {"release": set(), "apply_executed": set(), "reserve": set()}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and node.attr in callers:
                    callers[node.attr].add(fn.name)
    assert callers == {"release": {"transition"}, "apply_executed": {"transition", "_decide", "finish_executed"},
                       "reserve": {"_claim"}}

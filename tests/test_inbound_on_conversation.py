"""The inbound dedupe on the conversation item, attacked.

The lease claims the message and the commit marks it answered, both on the
conversation item (``cadencia_shared.ledger.inbound``). Proven here:

- any message id (printable, long, ``#``, ``.``, quotes) is a safe key: answered
  once, refused after, never confused with another id (hypothesis, moto in-process);
- ids older than the redelivery window are dropped at the next commit and only the
  ``REPLIES_KEPT`` most recent replies are kept (the item's growth is bounded);
- separate OS processes racing one message on the local stack: exactly one
  processes it, every other gets IN_PROGRESS or DONE, never "busy";
- SIGKILL after the lease, before the commit: the message is IN_PROGRESS while the
  dead lease lives, then processed exactly once by the redelivery;
- SIGKILL right after the commit: the redelivery gets DONE and the stored reply.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.ledger import (
    INBOUND_TTL_S,
    REPLIES_KEPT,
    ConversationBusy,
    ConversationStatus,
    Ledger,
    MessageAnswered,
    MessageInProgress,
)
from cadencia_shared.ledger.inbound import (
    ANSWERED_ATTRIBUTE,
    PROCESSING_ATTRIBUTE,
    AnsweredMessages,
    message_key,
)
from scripts.local_stack.aws import session_client

from .support.moto_ledger import ledger_table_in_process

TABLE = "ledger-inbound"
CUSTOMER = 7


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def moto_ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Ledger, Clock]]:
    with ledger_table_in_process(monkeypatch, TABLE) as client:
        clock = Clock()
        yield Ledger(TABLE, client, clock=clock), clock


def _answer(ledger: Ledger, conv: str, message_id: str, reply: dict[str, Any]) -> None:
    state = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id=message_id)
    ledger.commit_conversation(state, messages=state.messages, status=ConversationStatus.ACTIVE, reply=reply)


HOSTILE_IDS = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
    st.text(st.sampled_from("#.'\"$:[]{} \\-="), min_size=1, max_size=20),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1000, max_size=5000),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=HOSTILE_IDS, second=HOSTILE_IDS)
def test_any_message_id_is_answered_once_and_never_confused_with_another(moto_ledger, first, second):
    ledger, _ = moto_ledger
    conv = f"conv-{uuid.uuid4().hex}"
    _answer(ledger, conv, first, {"texto": first[:50]})
    with pytest.raises(MessageAnswered) as again:
        ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id=first)
    assert again.value.reply == {"texto": first[:50]} == ledger.read_conversation(conv).stored_reply(first)
    if second != first:  # another id is new: leased, claimed, released
        state = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id=second)
        ledger.release_conversation(state)
        assert not ledger.read_conversation(conv).has_answered(second)
    item = ledger.table.get(f"conversa#{conv}")
    assert set(item[ANSWERED_ATTRIBUTE]) == {message_key(first)} and PROCESSING_ATTRIBUTE not in item


def test_a_lease_hashes_its_message_id_once(moto_ledger, monkeypatch):
    """Granted, refused as answered, or refused as in progress: one SHA-256 per lease."""
    from cadencia_shared.ledger import conversations

    ledger, _ = moto_ledger
    hashed: list[str] = []
    monkeypatch.setattr(conversations, "message_key", lambda mid: hashed.append(mid) or message_key(mid))
    _answer(ledger, "conv-um-hash", "wamid.a", {"texto": "a"})
    assert hashed == ["wamid.a"]
    with pytest.raises(MessageAnswered):
        ledger.acquire_conversation(conversation_id="conv-um-hash", customer_id=CUSTOMER, lease_s=60,
                                    message_id="wamid.a")
    ledger.acquire_conversation(conversation_id="conv-um-hash", customer_id=CUSTOMER, lease_s=60, message_id="wamid.b")
    with pytest.raises(MessageInProgress):
        ledger.acquire_conversation(conversation_id="conv-um-hash", customer_id=CUSTOMER, lease_s=60,
                                    message_id="wamid.b")
    assert hashed == ["wamid.a", "wamid.a", "wamid.b", "wamid.b"]


def test_old_ids_are_pruned_and_only_the_latest_replies_are_kept(moto_ledger):
    ledger, clock = moto_ledger
    conv = "conv-crescimento"
    for i in range(10):  # one answered message an hour
        _answer(ledger, conv, f"wamid.{i}", {"texto": f"resposta {i}"})
        clock.now += 3600
    item = ledger.table.get(f"conversa#{conv}")
    assert len(item[ANSWERED_ATTRIBUTE]) == 10
    assert set(AnsweredMessages.from_item(item).replies) == {message_key(f"wamid.{i}") for i in range(10 - REPLIES_KEPT, 10)}
    with pytest.raises(MessageAnswered) as old:  # answered, its reply no longer kept
        ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id="wamid.0")
    assert old.value.reply is None and old.value.status == "ativa"
    clock.now += INBOUND_TTL_S - 5.5 * 3600  # wamid.0..4 are now older than the window, wamid.5 is not
    _answer(ledger, conv, "wamid.novo", {"texto": "nova"})
    item = ledger.table.get(f"conversa#{conv}")
    assert set(item[ANSWERED_ATTRIBUTE]) == {message_key(m) for m in
                                             ["wamid.5", "wamid.6", "wamid.7", "wamid.8", "wamid.9", "wamid.novo"]}
    # A redelivery after the window is a new message (as with the per-message TTL before).
    state = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id="wamid.0")
    ledger.release_conversation(state)


def test_answers_within_one_second_keep_the_latest_replies(moto_ledger):
    """Recency is the fenced version, not the clock (answers in the same second, or
    from a Lambda whose clock is behind, found the oldest reply kept)."""
    ledger, clock = moto_ledger
    conv = "conv-mesmo-segundo"
    for i in range(5):
        _answer(ledger, conv, f"wamid.{i}", {"texto": f"resposta {i}"})
        clock.now -= 1  # a clock that even goes back
    item = ledger.table.get(f"conversa#{conv}")
    assert set(AnsweredMessages.from_item(item).replies) == {message_key(f"wamid.{i}") for i in range(5 - REPLIES_KEPT, 5)}


def test_another_message_on_a_live_lease_is_busy_and_the_same_one_in_progress(moto_ledger):
    ledger, _ = moto_ledger
    ledger.acquire_conversation(conversation_id="conv-viva", customer_id=CUSTOMER, lease_s=60, message_id="m-1")
    with pytest.raises(MessageInProgress):
        ledger.acquire_conversation(conversation_id="conv-viva", customer_id=CUSTOMER, lease_s=60, message_id="m-1")
    with pytest.raises(ConversationBusy):
        ledger.acquire_conversation(conversation_id="conv-viva", customer_id=CUSTOMER, lease_s=60, message_id="m-2")
    with pytest.raises(ConversationBusy):  # no message (a resume, an operator)
        ledger.acquire_conversation(conversation_id="conv-viva", customer_id=CUSTOMER, lease_s=60)


# -- separate OS processes on the local stack -----------------------------------------
def _race_messages(endpoint: str, table: str, conv: str, rounds: int, barrier: Any, out: Any) -> None:
    """Each round, released with the other processes by ``barrier``: try to process that round's message."""
    ledger = Ledger(table, session_client("dynamodb", endpoint))
    for r in range(rounds):
        barrier.wait()
        out.put((r, _try_once(ledger, conv, f"wamid.corrida.{r}")))


def _try_once(ledger: Ledger, conv: str, message_id: str) -> str:
    try:
        state = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60,
                                            message_id=message_id)
    except MessageInProgress:
        return "em_processamento"
    except MessageAnswered as answered:
        return "respondida" if answered.reply == {"texto": "feito"} else "respondida_sem_resposta"
    except ConversationBusy:
        return "ocupada"
    time.sleep(0.2)  # a turn's work, while the others arrive
    ledger.commit_conversation(state, messages=[*state.messages, {"role": "user", "content": message_id}],
                               status=ConversationStatus.ACTIVE, reply={"texto": "feito"})
    return "processada"


def test_a_message_racing_in_separate_processes_is_processed_once(local_stack):
    ctx = mp.get_context("spawn")
    conv, rounds, racers = f"conv-corrida-{uuid.uuid4().hex[:8]}", 5, 6
    barrier, out = ctx.Barrier(racers), ctx.Queue()
    procs = [ctx.Process(target=_race_messages, args=(local_stack.aws_endpoint, local_stack.ledger_table, conv,
                                                      rounds, barrier, out)) for _ in range(racers)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=180) for _ in range(rounds * racers)]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    for r in range(rounds):
        outcomes = sorted(outcome for round_, outcome in results if round_ == r)
        assert outcomes.count("processada") == 1, outcomes
        assert set(outcomes) <= {"processada", "em_processamento", "respondida"}, outcomes
    assert "em_processamento" in {outcome for _, outcome in results}  # the processes did overlap
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    state = ledger.read_conversation(conv)
    assert state.turns == rounds and [m["content"] for m in state.messages] == [
        f"wamid.corrida.{r}" for r in range(rounds)]


LONG_LEASE_S = 3600


def _lease_then_die(endpoint: str, table: str, conv: str, message_id: str, lease_s: int, commit: bool) -> None:
    ledger = Ledger(table, session_client("dynamodb", endpoint))
    state = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=lease_s,
                                        message_id=message_id)
    if commit:
        ledger.commit_conversation(state, messages=[{"role": "user", "content": "uma vez"}],
                                   status=ConversationStatus.ACTIVE, reply={"texto": "feito"})
    os.kill(os.getpid(), signal.SIGKILL)  # no exception, no cleanup, no release


class _Clock:
    """The reader's clock: real time plus an offset the test moves (a lease ends when the test says)."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset_s


def _killed(local_stack, conv: str, message_id: str, lease_s: int, *, commit: bool,
            clock: _Clock | None = None) -> Ledger:
    proc = mp.get_context("spawn").Process(target=_lease_then_die, args=(
        local_stack.aws_endpoint, local_stack.ledger_table, conv, message_id, lease_s, commit))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == -signal.SIGKILL
    return Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint),
                  clock=clock or time.time)


def test_killed_after_the_lease_the_redelivery_processes_it_once_after_the_lease(local_stack):
    # The dead process's lease is an hour long and the reader's clock says when it is over: no
    # wall-clock window (a 2 s lease was over before a loaded machine got here).
    conv, wamid, clock = f"conv-morta-{uuid.uuid4().hex[:8]}", "wamid.morta", _Clock()
    ledger = _killed(local_stack, conv, wamid, LONG_LEASE_S, commit=False, clock=clock)
    with pytest.raises(MessageInProgress):  # the dead lease still lives
        ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id=wamid)
    clock.offset_s = LONG_LEASE_S + 1
    state = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id=wamid)
    ledger.commit_conversation(state, messages=[{"role": "user", "content": "uma vez"}],
                               status=ConversationStatus.ACTIVE, reply={"texto": "feito"})
    with pytest.raises(MessageAnswered) as again:
        ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id=wamid)
    assert again.value.reply == {"texto": "feito"}
    assert ledger.read_conversation(conv).turns == 1


def test_killed_after_the_commit_the_redelivery_gets_the_stored_reply(local_stack):
    conv, wamid = f"conv-commit-{uuid.uuid4().hex[:8]}", "wamid.commit"
    ledger = _killed(local_stack, conv, wamid, 60, commit=True)
    with pytest.raises(MessageAnswered) as again:
        ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60, message_id=wamid)
    assert again.value.reply == {"texto": "feito"}
    state = ledger.read_conversation(conv)
    assert state.turns == 1 and state.owner == ""  # the commit released the lease

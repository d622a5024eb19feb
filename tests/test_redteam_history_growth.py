"""Red team: a conversation's stored history must always fit its DynamoDB item.

Found: while a conversation waits for a person (or for an approval) the model is not
consulted and every customer message is appended to the stored history untrimmed —
and merged into ONE ``user`` message (roles alternate), which the count-based trim
could not cut anyway. A customer who keeps writing while waiting (4000 characters a
message, the channel's limit, text that compresses like base62) grew the item past
DynamoDB's 400 KB in ~70 messages here: every later commit failed with a
ValidationException (not a condition failure), the turn released its lease, the queue
redelivered the message until the DLQ, and the conversation was stuck for good — a
person's reply to it failed the same way. moto refuses at 405 000 bytes; real
DynamoDB at 400 KB including attribute names, so the bound is checked here against
the real limit with a margin for the other attributes.
"""

from __future__ import annotations

import json
import random
import string
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cadencia_shared.ledger import ConversationStatus, Ledger
from orchestrator import history
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel
from .support.moto_ledger import ledger_table_in_process
from .support.orchestrators import CountingInvoker, build

TABLE = "ledger-growth"
DYNAMODB_ITEM_LIMIT = 400 * 1024
CUSTOMER = 7


def _item_bytes(item: dict) -> int:
    """An upper estimate of DynamoDB's item size: names plus values, as raw bytes."""
    total = 0
    for name, value in item.items():
        total += len(name.encode())
        total += len(repr(value).encode()) if not isinstance(value, bytes | bytearray) else len(value)
    return total


def _noise(rnd: random.Random, size: int = 4000) -> str:
    return "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(size))


@pytest.mark.parametrize("status", [ConversationStatus.WAITING_HUMAN, ConversationStatus.WAITING_APPROVAL])
def test_a_customer_writing_while_waiting_never_outgrows_the_item(monkeypatch, status):
    with ledger_table_in_process(monkeypatch, TABLE) as client:
        ledger = Ledger(TABLE, client)
        conv = f"wa-{CUSTOMER}-espera{uuid.uuid4().hex[:6]}"
        first = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60)
        ledger.commit_conversation(first, messages=history.append_user_text([], "quero falar com alguém"),
                                   status=status)
        orch, _ = build(ScriptedModel(), ledger, CountingInvoker())
        rnd = random.Random(87)
        for n in range(160):
            last = _noise(rnd)
            reply = orch.handle(TurnRequest(conversaId=conv, clienteId=CUSTOMER, mensagemId=f"wamid.{n}",
                                            mensagem=last), Deadline.after(60))
            assert reply.status == status.value and not reply.duplicada
        raw = client.get_item(TableName=TABLE, Key={"pk": {"S": f"conversa#{conv}"}})["Item"]
        stored = ledger.read_conversation(conv)
        assert stored.turns == 161
        assert _item_bytes(raw["mensagensZ"]) < DYNAMODB_ITEM_LIMIT // 2
        # What is kept is still a valid history, and the newest text is in it.
        assert stored.messages[0]["role"] == "user"
        assert history.text_of(stored.messages[-1]["content"]).endswith(last)


def test_the_bound_cuts_whole_turns_first_and_keeps_every_tool_use_with_its_result():
    rnd = random.Random(5)
    messages: list = []
    for n in range(30):
        messages = history.append_user_text(messages, _noise(rnd, 3000))
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": _noise(rnd, 2000)},
            {"type": "tool_use", "id": f"toolu_{n}", "name": "consultar_status_pedido", "input": {"pedidoId": n}}]})
        messages.append({"role": "user", "content": [history.tool_result(f"toolu_{n}", _noise(rnd, 3000),
                                                                         is_error=False)]})
    small = history.bounded(messages, max_bytes=60_000)
    assert len(small) < len(messages) and small[-1] == messages[-1]
    assert len(json.dumps(small).encode()) <= 60_000
    assert small[0]["role"] == "user" and all(b["type"] == "text" for b in small[0]["content"])
    used = history.tool_use_ids(small)
    answered = {b["tool_use_id"] for m in small if m["role"] == "user" for b in m["content"]
                if b.get("type") == "tool_result"}
    assert used == answered
    assert history.bounded(messages[:3]) == messages[:3]  # under the bound: unchanged


def _long_waiting_conversation(ledger: Ledger, conv: str, rnd: random.Random) -> None:
    """A conversation of many short turns, just under the bound, now waiting for a person."""
    messages: list = []
    while history._size(messages) < history.STORED_HISTORY_MAX_BYTES - 3_000:
        messages = history.append_user_text(messages, _noise(rnd, 1500))
        messages = history.append_assistant_text(messages, _noise(rnd, 500))
    state = ledger.acquire_conversation(conversation_id=conv, customer_id=CUSTOMER, lease_s=60)
    ledger.commit_conversation(state, messages=messages, status=ConversationStatus.WAITING_HUMAN)


def test_a_persons_reply_rerun_after_the_bound_cut_the_history_is_not_written_twice(monkeypatch):
    """Found attacking the bound itself: the reply id counts the customer's messages, so a
    person's reply whose commit cut the oldest turn got another id when run again (its
    answer lost, the person retries): written, and sent, a second time."""
    from canal_whatsapp.contacts import ChannelContacts
    from orchestrator.human_reply import HumanReplies, HumanReplyRequest

    with ledger_table_in_process(monkeypatch, TABLE) as client:
        ledger = Ledger(TABLE, client)
        conv = f"wa-{CUSTOMER}-longa{uuid.uuid4().hex[:6]}"
        _long_waiting_conversation(ledger, conv, random.Random(3))
        replies = HumanReplies(ledger, ChannelContacts(ledger), sender=None)  # no address: nothing is sent
        text = _noise(random.Random(4), 4000)
        request = HumanReplyRequest(conversaId=conv, texto=text)
        first = replies.reply(request)
        again = replies.reply(request)
        assert not first.repeated and again.repeated and again.reply_id == first.reply_id
        stored = ledger.read_conversation(conv)
        assert sum(1 for m in stored.messages for b in m["content"] if b.get("text") == text) == 1
        # Blocks only: over the bound by at most the newest reply, and many replies stay there
        # (they join one message, whose oldest blocks go), far inside the 400 KB item.
        one_reply = len(text.encode()) + 100
        assert history._size(stored.messages) <= history.STORED_HISTORY_MAX_BYTES + one_reply
        rnd = random.Random(6)
        for _ in range(60):
            replies.reply(HumanReplyRequest(conversaId=conv, texto=_noise(rnd, 4000)))
        assert history._size(ledger.read_conversation(conv).messages) <= history.STORED_HISTORY_MAX_BYTES + one_reply


_TURN = st.tuples(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=4),  # customer texts (merged)
                  st.booleans(),  # the model called a tool
                  st.text(min_size=0, max_size=300))  # its text


def _history_of(turns) -> list:
    messages: list = []
    for n, (texts, called, said) in enumerate(turns):
        for text in texts:
            messages = history.append_user_text(messages, text)
        content = ([{"type": "text", "text": said}] if said else []) + (
            [{"type": "tool_use", "id": f"toolu_{n}", "name": "consultar_status_pedido", "input": {}}]
            if called else [])
        messages.append({"role": "assistant", "content": content or [{"type": "text", "text": "ok"}]})
        if called:
            messages.append({"role": "user", "content": [history.tool_result(f"toolu_{n}", "{}", is_error=False)]})
    return messages


@settings(max_examples=150, deadline=None)
@given(turns=st.lists(_TURN, min_size=1, max_size=12), max_bytes=st.integers(50, 20_000), cut=st.booleans())
def test_the_bound_always_leaves_a_valid_history(turns, max_bytes, cut):
    messages = _history_of(turns)
    out = history.bounded(messages, max_bytes, cut_turns=cut)
    assert out and out[0]["role"] == "user"
    assert [m["role"] for m in out] == [m["role"] for m in messages[len(messages) - len(out):]]  # a suffix, by role
    if not cut:
        assert len(out) == len(messages)  # blocks only: the messages (and the reply id's count) stay
    used = history.tool_use_ids(out)
    answered = {b["tool_use_id"] for m in out if m["role"] == "user" for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_result"}
    assert used == answered  # every tool_use keeps its result, no orphan result
    newest = history._blocks(messages[-1]["content"])[-1]
    assert history._blocks(out[-1]["content"])[-1] == newest  # the newest block is never dropped
    if history._size(out) > max_bytes:  # only when nothing more may go:
        assert not any(b.get("type") == "text" for m in out for b in history._blocks(m["content"])[:-1])
        if cut:  # ... and no older turn is left to cut
            assert len(history.trim(out, len(out) - 1)) == len(out)

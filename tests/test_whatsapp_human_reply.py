"""A person's reply goes out through the channel, the way the agent's replies go:
``scripts/atendente.py responder`` → ``cadencia-resposta-atendente``
(orchestrator/human_reply.py) → the channel's outbox and Sender → the fake Cloud API.

Each test hands a conversation to a person through the whole channel (a customer
asks for an "atendente"; the scripted model asks for a person; the orchestrator hands off),
then runs the attendant's command as its own OS process, as a person would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import ConversationStatus, Ledger
from canal_whatsapp.conversation import conversation_id
from orchestrator.human_reply import reply_id, reply_position
from scripts import atendente
from scripts.local_stack.aws import session_client
from scripts.local_stack.whatsapp_channel import LocalChannel
from scripts.local_stack.whatsapp_fake import notification, text_message
from scripts.local_stack.whatsapp_model import PERSON_TEXT
from tests.support.whatsapp import ANA, BRUNO, day_ts, scripted_channel

pytestmark = pytest.mark.stack
ROOT = Path(__file__).resolve().parents[1]
HANDED_OFF = PERSON_TEXT  # the scripted model asks for a person (precisaDePessoa)


def process_env() -> dict[str, str]:
    """Read when a process starts: the session's local stack directory is set by its fixture."""
    return {**os.environ, "COLUMNS": "250", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'functions'}"}


@pytest.fixture(scope="module")
def channel(local_stack):
    # Published: the attendant's command finds this channel through the local stack's directory.
    with scripted_channel(local_stack, consumers=1, publish=True) as ch:
        yield ch


@pytest.fixture
def ledger(local_stack):
    return Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))


def hand_off(ch: LocalChannel, wa_id: str, cliente_id: int, day: int) -> str:
    """A customer asks for a person through the channel; the conversation waits for one."""
    ch.api.reset()
    assert ch.webhook.post(notification([text_message(wa_id, "quero falar com um atendente",
                                                      timestamp=day_ts(day))])) == 200
    sent = ch.wait_for_replies(wa_id, 1)
    assert [m.body[:len(HANDED_OFF)] for m in sent] == [HANDED_OFF]
    ch.api.reset()
    conv = conversation_id(cliente_id, str(day_ts(day)))
    assert ledger_of(ch).read_conversation(conv).status is ConversationStatus.WAITING_HUMAN
    return conv


def responder(conv: str, text: str, *, die_at: str | None = None, timeout: float = 120
              ) -> subprocess.CompletedProcess[str]:
    """``python -m scripts.atendente responder`` in its own process; ``die_at`` names the
    outbox step (``Outbox.<method>``) at whose start the process SIGKILLs itself."""
    args = ["responder", atendente.reference(conv), "--texto", text]
    if die_at is None:
        cmd = [sys.executable, "-m", "scripts.atendente", *args]
    else:
        driver = ("import os, signal, sys\n"
                  "from canal_whatsapp import outbox\n"
                  f"setattr(outbox.Outbox, {die_at!r}, lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))\n"
                  "from scripts.atendente import main\n"
                  f"sys.exit(main({args!r}))\n")
        cmd = [sys.executable, "-c", driver]
    return subprocess.run(cmd, cwd=ROOT, env=process_env(), capture_output=True, text=True, timeout=timeout)


def person_texts(ledger: Ledger, conv: str, text: str) -> int:
    state = ledger.read_conversation(conv)
    return sum(1 for m in state.messages if m["role"] == "assistant"
               for b in m["content"] if isinstance(b, dict) and b.get("text") == text)


def outbox_key(ledger: Ledger, conv: str, text: str) -> str:
    """The outbox key of ``text`` as the person's reply to the conversation as it stands now."""
    return f"envio#{reply_id(conv, reply_position(ledger.read_conversation(conv)), text)}"


def outbox(ledger: Ledger, conv: str, text: str) -> dict:
    return ledger.table.get(outbox_key(ledger, conv, text)) or {}


def test_a_persons_reply_reaches_the_customer_once_and_a_rerun_sends_nothing(channel, ledger):
    conv = hand_off(channel, ANA, 1001, 40)
    text = "Oi, Ana! Aqui é a Júlia, da Cadência. Vou cuidar do seu pedido."
    done = responder(conv, text)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "enviada ao cliente pelo WhatsApp" in done.stdout
    sent = channel.api.sent_to(ANA)
    assert [(m.body, m.context_message_id) for m in sent] == [(text, None)]  # a person's reply quotes nothing
    again = responder(conv, text)
    assert again.returncode == 0 and "já tinha sido registrada" in again.stdout
    assert len(channel.api.sent_to(ANA)) == 1
    assert person_texts(ledger, conv, text) == 1
    assert outbox(ledger, conv, text)["status"] == "enviado"
    assert ledger.read_conversation(conv).status is ConversationStatus.WAITING_HUMAN
    shown = subprocess.run([sys.executable, "-m", "scripts.atendente", "mostrar", atendente.reference(conv)],
                           cwd=ROOT, env=process_env(), capture_output=True, text=True, timeout=120)
    assert f"atendente: {text} [envio: enviado]" in shown.stdout, shown.stdout
    assert_the_reply_is_the_anchored_tail(ledger, conv)


def verify_chain(conv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scripts.auditoria", "verificar", "--local", "--conversa", conv],
                          cwd=ROOT, env=process_env(), capture_output=True, text=True, timeout=120)


def assert_the_reply_is_the_anchored_tail(ledger: Ledger, conv: str) -> None:
    """The reply's link is on the conversation's hash chain and moved its head anchor, as the
    orchestrator's do: deleting that last link is reported (an unanchored tail would not be)."""
    checked = verify_chain(conv)
    assert checked.returncode == 0 and "0 quebrada(s)" in checked.stdout, checked.stdout + checked.stderr
    chain = AuditChain(AUDIT_TABLE, ledger.client, anchor_table=ledger.table.name)
    last = list(chain.records(conv))[-1]
    assert last["evento"] == "ATENDENTE_RESPONDEU"
    ledger.client.delete_item(TableName=AUDIT_TABLE, Key={"cadeia": {"S": conv}, "seq": {"N": str(last["seq"])}})
    broken = verify_chain(conv)
    assert broken.returncode == 1 and f"seq={last['seq']}" in broken.stdout, broken.stdout + broken.stderr


def test_the_same_text_after_the_customer_wrote_again_is_a_new_reply(channel, ledger):
    """"ok" to two customer messages goes out twice; "ok" run twice with nothing from the
    customer in between is one reply (a re-run after a crash must not send a copy)."""
    conv = hand_off(channel, ANA, 1001, 44)
    assert responder(conv, "ok").returncode == 0
    assert responder(conv, "ok").returncode == 0  # nothing new from the customer: the same reply
    assert [m.body for m in channel.api.sent_to(ANA)] == ["ok"]
    assert channel.webhook.post(notification([text_message(ANA, "e o prazo de entrega?",
                                                            timestamp=day_ts(44) + 60)])) == 200
    assert len(channel.wait_for_replies(ANA, 2)) == 2  # the agent's "a person will answer" while the conversation waits
    channel.api.reset()
    again = responder(conv, "ok")
    assert again.returncode == 0 and "já tinha sido registrada" not in again.stdout, again.stdout
    assert [m.body for m in channel.api.sent_to(ANA)] == ["ok"]
    assert person_texts(ledger, conv, "ok") == 2


def test_a_5xx_on_send_is_retried_and_delivered_once(channel, ledger):
    conv = hand_off(channel, BRUNO, 1002, 41)
    text = "Bruno, já pedi a troca. Chega em dois dias úteis."
    channel.api.fail_next(2, status=503, code=2)
    done = responder(conv, text)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [m.body for m in channel.api.sent_to(BRUNO)] == [text]
    record = outbox(ledger, conv, text)
    assert record["status"] == "enviado" and int(record["tentativas"]) == 3


@pytest.mark.parametrize("step", ["claim", "record"])
def test_killed_before_the_send_then_run_again_sends_exactly_once(channel, ledger, step):
    """SIGKILL at the start of the outbox claim (the record is written, nothing sent) or of
    the outbox record (the reply is committed in the conversation, no record yet)."""
    conv = hand_off(channel, ANA, 1001, 42 if step == "claim" else 43)
    text = f"Ana, seu reembolso foi pedido ao financeiro ({step})."
    killed = responder(conv, text, die_at=step)
    assert killed.returncode == -signal.SIGKILL
    assert channel.api.sent_to(ANA) == []
    assert person_texts(ledger, conv, text) == 1  # written once, before the kill
    assert outbox(ledger, conv, text).get("status") == ("pendente" if step == "claim" else None)
    if step == "claim":  # the person sees a reply that is written but not sent
        shown = subprocess.run([sys.executable, "-m", "scripts.atendente", "mostrar", atendente.reference(conv)],
                               cwd=ROOT, env=process_env(), capture_output=True, text=True, timeout=120)
        assert "atendente: " + text + " [envio: pendente]" in shown.stdout, shown.stdout
    rerun = responder(conv, text)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert [m.body for m in channel.api.sent_to(ANA)] == [text]
    assert person_texts(ledger, conv, text) == 1
    assert outbox(ledger, conv, text)["status"] == "enviado"


def test_killed_mid_send_is_never_sent_again(local_stack, ledger):
    """The request is on the wire when the process dies: the outcome is unknown, so
    the reply is never sent again (at most once), and a re-run says so (alarmed)."""
    sender_env = {"WHATSAPP_SEND_TIMEOUT_S": "10"}
    with scripted_channel(local_stack, consumers=1, publish=True, sender_env=sender_env) as ch:
        conv = hand_off(ch, BRUNO, 1002, 44)
        text = "Bruno, a nota fiscal segue por e-mail."
        ch.api.hang_next(1, 30)
        proc = subprocess.Popen([sys.executable, "-m", "scripts.atendente", "responder",
                                 atendente.reference(conv), "--texto", text], cwd=ROOT, env=process_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert len(ch.wait_for_replies(BRUNO, 1)) == 1  # recorded by the fake: on the wire now
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert outbox(ledger, conv, text)["status"] == "enviando"
        # Until the send's lease (12 s: its timeout + 2) expires, a re-run says the send is
        # in progress elsewhere; then the record becomes 'desconhecido' and the re-run says so.
        answers = [responder(conv, text)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "resultado desconhecido" not in answers[-1].stdout:
            time.sleep(1)
            answers.append(responder(conv, text))
        assert all(a.returncode == 2 and "em andamento" in a.stdout for a in answers[:-1])
        assert answers[-1].returncode == 2 and "resultado desconhecido" in answers[-1].stdout
        assert "resultado desconhecido" in responder(conv, text).stdout  # and stays so
        assert outbox(ledger, conv, text)["status"] == "desconhecido"
        assert len(ch.api.sent_to(BRUNO)) == 1


def test_outside_the_24h_window_it_is_not_sent_and_the_person_is_told(channel, ledger):
    conv = hand_off(channel, ANA, 1001, 45)
    text = "Ana, voltei com a resposta do financeiro."
    channel.api.fail_next(1, status=400, code=131047)
    done = responder(conv, text)
    assert done.returncode == 2 and "24 horas" in done.stdout
    assert channel.api.sent_to(ANA) == []
    assert outbox(ledger, conv, text)["status"] == "fora_da_janela"
    audit = [r["evento"] for r in AuditChain(AUDIT_TABLE, ledger.client).records(conv)]  # the hash chain
    assert "RESPOSTA_FORA_DA_JANELA" in audit and "ATENDENTE_RESPONDEU" in audit
    assert person_texts(ledger, conv, text) == 1  # kept in the conversation: a person decided it


def test_two_attendants_sending_the_same_reply_at_once_send_it_once(channel, ledger):
    """Two processes run the same reply at the same moment (two people, or one who
    pressed enter twice in two terminals)."""
    conv = hand_off(channel, BRUNO, 1002, 46)
    text = "Bruno, vou verificar com a transportadora."
    cmd = [sys.executable, "-m", "scripts.atendente", "responder", atendente.reference(conv), "--texto", text]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=process_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    deadline = time.monotonic() + 30
    while outbox(ledger, conv, text).get("status") != "enviado" and time.monotonic() < deadline:
        responder(conv, text)  # whoever lost a race (busy, in progress) finishes it by running again
    assert [m.body for m in channel.api.sent_to(BRUNO)] == [text], outs
    assert person_texts(ledger, conv, text) == 1


def test_a_conversation_back_with_the_agent_refuses_a_persons_reply(channel, ledger):
    conv = hand_off(channel, ANA, 1001, 47)
    assert atendente.main(["devolver", atendente.reference(conv)]) == 0
    version = ledger.read_conversation(conv).version
    # No longer in the hand-off list, so the command cannot even name it; the Lambda refuses it too.
    from orchestrator import human_reply_handler
    from orchestrator.invokers.local import LocalContext, function_environment

    env = {**ledger_env(channel), **channel.sender_environment()}
    with function_environment(env):
        human_reply_handler.reset()
        answer = human_reply_handler.lambda_handler({"conversaId": conv, "texto": "oi"},
                                                    LocalContext("cadencia-resposta-atendente", timeout_s=30))
        human_reply_handler.reset()
    assert answer["ok"] is False and answer["erro"]["codigo"] == "conversa_nao_aguarda_atendente"
    assert ledger.read_conversation(conv).version == version and person_texts(ledger, conv, "oi") == 0
    assert ledger.table.get(outbox_key(ledger, conv, "oi")) is None
    assert channel.api.sent_to(ANA) == []


def ledger_of(ch: LocalChannel) -> Ledger:
    return Ledger(ch.state.ledger_table, session_client("dynamodb", ch.state.aws_endpoint))


def ledger_env(ch: LocalChannel) -> dict[str, str]:
    return {**ch.state.aws_environment(), "LEDGER_TABLE": ch.state.ledger_table}


def test_a_person_answers_a_conversa_py_customer_from_another_terminal(local_stack, ledger, tmp_path):
    """The whole thing as people do it: a customer in scripts/conversa.py (stdin piped)
    asks for a person; an attendant in another process lists and answers; the
    customer's /aguardar shows the reply."""
    from scripts.local_stack import postgres

    postgres.apply_sql(local_stack.postgres, ("demo.sql",))
    out_file = (tmp_path / "conversa.out").open("w+")
    chat = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "conversa.py"), "--numero", ANA],
                            stdin=subprocess.PIPE, stdout=out_file, stderr=subprocess.STDOUT, text=True,
                            cwd=ROOT, env=process_env())
    try:
        chat.stdin.write("quero falar com um atendente\n")
        chat.stdin.flush()
        conv = conversation_id(1001, str(int(time.time())))
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            state = ledger.read_conversation(conv)
            if state is not None and state.status is ConversationStatus.WAITING_HUMAN:
                break
            time.sleep(0.5)
        listed = subprocess.run([sys.executable, "-m", "scripts.atendente", "listar"], cwd=ROOT, env=process_env(),
                                capture_output=True, text=True, timeout=120)
        assert atendente.reference(conv) in listed.stdout and conv not in listed.stdout
        text = "Olá, Ana! Sou o Pedro, atendente da Cadência. Em que posso ajudar?"
        done = responder(conv, text)
        assert done.returncode == 0, done.stdout + done.stderr
        chat.stdin.write("/aguardar\n/sair\n")
        chat.stdin.close()
        assert chat.wait(timeout=180) == 0
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    out_file.seek(0)
    out = out_file.read()
    assert HANDED_OFF in out and out.count(text) == 1, out[-3000:]
    assert person_texts(ledger, conv, text) == 1


def test_a_persons_reply_leaves_no_phone_number_on_the_conversation_item(channel, ledger):
    """Red team: the customer's number is kept only where it expires with the ledger's TTL
    (``contato#``, ``envio#``). A person's reply stored its address (``para``: the wa_id)
    in the conversation item's ``respostas``, and that item never expires: the number
    stayed for good once a person had answered last. A re-run still sends nothing."""
    conv = hand_off(channel, ANA, 1001, 53)
    text = "Oi, Ana! Aqui é o Caio, da Cadência. Já estou vendo o seu caso."
    done = responder(conv, text)
    assert done.returncode == 0, done.stdout + done.stderr
    raw = ledger.client.get_item(TableName=ledger.table.name, Key={"pk": {"S": f"conversa#{conv}"}})["Item"]
    kept = zlib.decompress(raw["respostas"]["B"]).decode()
    assert ANA not in kept and ANA not in str(raw)
    again = responder(conv, text)
    assert again.returncode == 0 and "já tinha sido registrada" in again.stdout
    assert [m.body for m in channel.api.sent_to(ANA)] == [text]
